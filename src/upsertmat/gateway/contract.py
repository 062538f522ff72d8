"""The gateway's REST contract: every request and response body as a typed model.

Shared by the service (FastAPI validates requests and renders responses with them, and the
OpenAPI schema at ``/v1/openapi.json`` is generated from them) and by ``upsertmat client``
(:mod:`upsertmat.client.http` parses every answer into them). pydantic only: importing this
module starts nothing. Times are RFC 3339 UTC strings (``2026-11-27T21:22:00.123Z``).
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, model_validator
from pydantic.json_schema import SkipJsonSchema

from ..impls.settings import ConflictBehavior, TimeDomain, UpdateType
from .lifecycle import JobState

SESSION_ID = r"^s-[0-9a-f]{10}$"
JOB_ID = r"^j-[0-9a-f]{10}$"
TABLE_TOKEN = r"^t-[0-9a-f]{10}\.[0-9]{1,9}$"
CHANGELOG_TOKEN = r"^c-[0-9a-f]{10}\.[0-9]{1,9}$"

Scalar = str | int | float | bool | None


class Strict(BaseModel):
    """Request bodies refuse unknown fields."""

    model_config = ConfigDict(extra="forbid")


DURATION = r"^[0-9]{1,12}( ?(ms|s|min|h|d))?$"


class PipelineStrategy(enum.Enum):
    """The strategies the pipeline runs (``table.exec.sink.upsert-materialize-strategy.type``):
    every one but SORTED, whose ordered seek Spark's state store lacks. The schema lists only
    these, so a request it accepts is one the gateway accepts."""

    # tests/gateway/test_contract.py checks them against the pipeline's own list.

    LEGACY = "LEGACY"
    VALUE = "VALUE"
    MAP = "MAP"
    ADAPTIVE = "ADAPTIVE"


class Properties(Strict):
    """Configuration keys (flat, dotted names, as ``upsertmat replay --set`` takes them); any
    other key is refused (400). The pipeline keeps state in Spark's state store, so
    ``state.backend.type`` can only be ``spark``. The ADAPTIVE thresholds are set in a job file's
    ``config`` (their rule, high above low, spans two keys, which a schema cannot say)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=False)

    strategy: PipelineStrategy | None = Field(
        default=None, alias="table.exec.sink.upsert-materialize-strategy.type"
    )
    backend: Literal["spark"] | None = Field(default=None, alias="state.backend.type")
    ttl: Annotated[StrictInt, Field(ge=0, le=10**15)] | Annotated[str, Field(pattern=DURATION)] | None = (
        Field(
            default=None,
            alias="table.exec.state.ttl",
            description="milliseconds (0: off) or a duration such as '10 s', '1 h'",
        )
    )
    time_domain: TimeDomain | None = Field(default=None, alias="upsertmat.state.ttl.time-domain")
    update_type: UpdateType | None = Field(default=None, alias="upsertmat.state.ttl.update-type")
    expiry_budget: StrictInt | None = Field(
        default=None, ge=0, le=10**12, alias="upsertmat.state.ttl.expiry-budget"
    )
    checkpoint_interval: StrictInt | None = Field(
        default=None, ge=1, le=10**12, alias="execution.checkpointing.interval"
    )
    async_state: StrictBool | None = Field(default=None, alias="table.exec.async-state.enabled")
    conflict: ConflictBehavior | None = Field(default=None, alias="table.exec.sink.conflict-strategy")
    miss_rows: StrictInt | None = Field(default=None, ge=0, le=10**6, alias="upsertmat.misses.max-rows")

    # The aliases are the keys of upsertmat.impls.config, written out: a type checker needs
    # literal aliases (tests/gateway/test_contract.py checks that each is a known key).

    def layer(self) -> dict[str, Any]:
        """The keys given, by their dotted names."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class SessionRequest(Strict):
    """``POST /v1/sessions``: the session's configuration layer."""

    properties: Properties = Field(default_factory=Properties)


class ConfigureRequest(Strict):
    """``POST /v1/sessions/{session}/configure``: properties set on top of the session's."""

    properties: Properties


class SubmitRequest(Strict):
    """``POST /v1/sessions/{session}/jobs``: exactly one of ``job`` (a job file's YAML text) and
    ``plan`` (a compiled plan), plus per-request configuration keys."""

    job: Annotated[str, Field(min_length=1, max_length=1 << 20)] | SkipJsonSchema[None] = Field(
        default=None, description="the job file's YAML"
    )
    plan: dict[str, Any] | SkipJsonSchema[None] = Field(
        default=None, description="a compiled plan (upsertmat compile-plan)"
    )
    settings: Properties = Field(default_factory=Properties, description="per-request configuration keys")

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"oneOf": [{"required": ["job"]}, {"required": ["plan"]}]},
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> SubmitRequest:
        for name in ("job", "plan"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name!r} is null: leave it out")
        if (self.job is None) == (self.plan is None):
            raise ValueError("give exactly one of 'job' (YAML text) and 'plan' (a compiled plan)")
        return self


class ResultsOnDelete(enum.Enum):
    """What ``DELETE /v1/jobs/{job}`` does with a job's results."""

    KEEP = "keep"
    DELETE = "delete"


class ErrorDetail(BaseModel):
    """An error's status and message."""

    status: int
    message: str


class ErrorBody(BaseModel):
    """Every error: ``{"error": {"status": 4xx, "message": "..."}}``."""

    error: ErrorDetail


class Bounds(BaseModel):
    """The gateway's bounds (``upsertmat gateway --help``)."""

    max_body_bytes: int
    max_jobs: int
    max_sessions: int
    session_idle_seconds: float
    snapshot_seconds: float
    max_snapshot_rows: int
    max_snapshots: int
    max_snapshot_bytes: int
    max_readers: int
    max_page_size: int


class Info(BaseModel):
    """``GET /v1/info``."""

    version: str
    master: str
    trigger_interval: str
    tls: bool
    bounds: Bounds


class Session(BaseModel):
    """A session and its configuration layer."""

    session: str
    properties: dict[str, Scalar]
    created: datetime


class SessionClosed(BaseModel):
    """``DELETE /v1/sessions/{session}``."""

    session: str
    closed: bool


class JobStatus(BaseModel):
    """A job's status: what it is, what the user wants it to be, its progress."""

    id: str
    name: str
    session: str
    kind: Literal["job", "plan"]
    state: JobState
    wanted: Literal["RUNNING", "STOPPED"]
    error: str | None
    created: datetime
    table: str | None = None
    sink: str | None = None
    committed_batch: int | None = None
    rows: int | None = None
    batches: int = 0
    changes: int = 0
    changes_per_second: float = 0.0
    last_batch_at: datetime | None = None
    running_since: datetime | None = None


class JobList(BaseModel):
    """``GET /v1/jobs``."""

    jobs: list[JobStatus]


class JobDeleted(BaseModel):
    """``DELETE /v1/jobs/{job}``."""

    id: str
    deleted: bool
    results: ResultsOnDelete
    kept_in: str | None = Field(description="where the job's directory was moved (results=keep)")


class TablePage(BaseModel):
    """A page of a table snapshot pinned to one committed batch."""

    job: str
    snapshot: str
    batch: int | None
    columns: list[str]
    rows: list[list[Any]]
    page: int
    pages: int
    total: int
    held: int
    expires: datetime
    token: str
    next_token: str | None


class Change(BaseModel):
    """One committed table change: position, batch id, op, row."""

    pos: int
    batch: int
    op: Literal["+I", "-U", "+U", "-D"]
    row: list[Any]


class ChangelogPage(BaseModel):
    """The committed changes after a token."""

    job: str
    changes: list[Change]
    token: str
    next_token: str | None
    eos: bool


class BatchRecord(BaseModel):
    """One committed micro-batch of a job in this gateway process: when it committed, its id,
    the changes it applied, the job's changes/s then, its time in the sink step (Spark stages
    included) and the source files waiting then (null before the first count)."""

    at: datetime
    batch: int
    changes: int
    changes_per_second: float
    batch_seconds: float
    files_waiting: int | None


class JobHistory(BaseModel):
    """``GET /v1/jobs/{job}/history``: the job's last batches (at most 300, oldest first; kept in
    memory since the job last started in this process), what the status page plots."""

    job: str
    batches: list[BatchRecord]


class LoginLink(BaseModel):
    """A one-time link that opens the status page with a cookie (``POST /v1/login-links``)."""

    path: str
    expires: datetime
