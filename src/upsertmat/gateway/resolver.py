"""A job record (or a document just submitted) as the job it runs: every configuration layer
applied, its paths confined to the data root.

Layers, lowest first: built-in < the pipeline's < the gateway's defaults < the session's (copied
into the job when it was submitted: a job outlives its session) < the job file's ``config`` < the
request's settings. A relative source is relative to the data root, relative outputs to the job's
directory ``<root>/jobs/<job id>/``, where an internal sink keeps ``result.db``. A record's
document and layers never change, so a resolved job is cached by its id until it is forgotten.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..impls.config import ConfigError, flatten
from ..jobs.embedded import RESULT_DATABASE
from ..jobs.loader import Layer, job_from_document
from ..jobs.model import JobSpec
from ..plan.codec import parse_plan
from ..plan.compiler import job_of_plan
from ..plan.model import PlanError
from .confine import OutsideRoot, confine_job
from .documents import Submitted, check_spark
from .errors import Forbidden, Invalid
from .registry import JobRecord, Registry
from .settings import GatewaySettings


class Resolver:
    """Resolves the jobs of one data root (``root``, resolved) under ``settings``."""

    def __init__(self, root: Path, registry: Registry, settings: GatewaySettings) -> None:
        self.root = root
        self.registry = registry
        self.settings = settings
        self._resolved: dict[str, JobSpec] = {}

    def job_dir(self, job_id: str) -> Path:
        """The job's own directory under the data root."""
        return self.root / "jobs" / job_id

    def resolve(self, record: JobRecord) -> JobSpec:
        """The job of a registered record, cached; Invalid (a document or layer that no longer
        resolves) or Forbidden (a path outside the root) otherwise. O(1) once cached."""
        cached = self._resolved.get(record.id)
        if cached is not None:
            return cached
        submitted = Submitted.stored(record.kind, record.document)
        job = self.resolve_document(record.id, record.session_id, submitted, record.settings)
        if self.registry.job(record.id) is not None:  # not forgotten meanwhile
            self._resolved[record.id] = job
        return job

    def remember(self, job_id: str, job: JobSpec) -> None:
        """Cache the job just resolved from its submitted document (it is not resolved again)."""
        self._resolved[job_id] = job

    def forget(self, job_id: str) -> None:
        self._resolved.pop(job_id, None)

    def resolve_document(
        self, job_id: str, session_id: str, submitted: Submitted, layers: dict[str, Any]
    ) -> JobSpec:
        """The job ``submitted`` describes for job ``job_id``, every layer applied, confined.

        ``layers`` holds ``{"session": layer, "request": layer}`` (the session's layer copied
        into the job when it was submitted)."""
        below: list[Layer] = [("the gateway's defaults", flatten(self.settings.defaults))]
        session = layers.get("session") or {}
        if session:
            below.append((f"session {session_id}", session))
        layer = layers.get("request") or {}
        request: list[Layer] = [("the request's settings", layer)] if layer else []
        directory = self.job_dir(job_id)
        internal = str(directory / RESULT_DATABASE)
        try:
            if submitted.kind == "plan":
                job = job_of_plan(
                    parse_plan(submitted.data),
                    self.root,
                    "the plan",
                    request,
                    output_base=directory,
                    internal_url=internal,
                    below_job=below,
                )
            else:
                data = submitted.data
                if not isinstance(data, dict):
                    raise Invalid("the job must be a YAML mapping (name, source, keys, sink, …)")
                spark = data.get("spark")
                if isinstance(spark, dict):
                    check_spark(spark, self.settings.master)
                job = job_from_document(
                    data,
                    base=self.root,
                    where="the job",
                    cli_layers=request,
                    output_base=directory,
                    internal_url=internal,
                    below_job=below,
                )
        except (PlanError, ConfigError) as error:
            raise Invalid(str(error)) from None
        try:
            confine_job(job, self.root, directory)
        except OutsideRoot as error:
            raise Forbidden(str(error)) from None
        return job
