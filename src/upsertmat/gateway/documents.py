"""A submitted job file or compiled plan, read once: its text (what the registry keeps, so the job
can be resolved again after a gateway restart) and its parsed data (what the job is resolved from
when it is submitted).

A job file's YAML is parsed safely (:func:`load_submitted`); a plan arrives already parsed (the
request's JSON) and is only rendered to text for the registry. Nothing here reads a path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from .errors import Invalid

MAX_YAML_DEPTH = 32


def load_submitted(text: str) -> Any:
    """A submitted job's or plan's YAML/JSON, parsed safely: no aliases (an alias bomb expands
    exponentially when the document is walked), nesting at most :data:`MAX_YAML_DEPTH` deep.
    Invalid otherwise. O(len(text))."""
    try:
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise Invalid("the job uses a YAML alias (*name); write the values out")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise Invalid(f"the job nests deeper than {MAX_YAML_DEPTH} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise Invalid(f"the job is not valid YAML: {error}") from None


@dataclass(frozen=True)
class Submitted:
    """A job document: ``kind`` (``job`` or ``plan``), its ``text`` and its parsed ``data``."""

    kind: str
    text: str
    data: Any

    @classmethod
    def job(cls, text: str) -> Submitted:
        """A job file's YAML text, parsed here (Invalid if it cannot be)."""
        return cls("job", text, load_submitted(text))

    @classmethod
    def plan(cls, data: Mapping[str, Any]) -> Submitted:
        """A compiled plan the request's JSON already holds; its text is for the registry."""
        return cls("plan", json.dumps(data), dict(data))

    @classmethod
    def stored(cls, kind: str, text: str) -> Submitted:
        """A document as the registry keeps it (after a gateway restart), parsed again."""
        return cls(kind, text, load_submitted(text))


def check_spark(spark: Mapping[str, Any], master: str) -> None:
    """Invalid for a job file's ``spark`` settings the gateway does not take: another master
    (every job runs on the gateway's own session) or the UI."""
    found = spark.get("master")
    if found is not None and found != master:
        raise Invalid(f"spark.master: the gateway runs every job on its own master {master!r}")
    if spark.get("ui"):
        raise Invalid("spark.ui: the gateway's Spark session has no UI per job")
