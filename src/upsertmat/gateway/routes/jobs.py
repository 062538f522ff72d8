"""Jobs: submit one in a session, list them, a job's status, stop, restart, delete, explain."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse

from ..contract import JobDeleted, JobList, JobStatus, ResultsOnDelete, SubmitRequest
from ..documents import Submitted
from ..service import Gateway
from .common import JobId, SessionId
from .errors import errors


def router(gateway: Gateway) -> APIRouter:
    """The job routes of ``gateway``."""
    routes = APIRouter()

    @routes.post(
        "/v1/sessions/{session}/jobs",
        status_code=201,
        summary="submit a job file or a compiled plan",
        responses=errors(400, 403, 404, 409, 413, 429),
    )
    def submit(session: SessionId, body: SubmitRequest) -> JobStatus:
        if body.job is not None:
            submitted = Submitted.job(body.job)
        else:
            assert body.plan is not None  # the contract's validator: exactly one of the two
            submitted = Submitted.plan(body.plan)
        record = gateway.submit(session, submitted, body.settings.layer())
        return gateway.status(record)

    @routes.get("/v1/jobs", summary="every job with its status", responses=errors())
    def jobs() -> JobList:
        return JobList(jobs=[gateway.status(record) for record in gateway.registry.jobs()])

    @routes.get(
        "/v1/jobs/{job}",
        summary="a job's status: state, batches, rows, changes/s, last error",
        responses=errors(400, 404),
    )
    def job(job: JobId) -> JobStatus:
        return gateway.status(gateway.job(job))

    @routes.delete(
        "/v1/jobs/{job}",
        summary="forget a stopped or failed job; results=keep moves its directory to deleted/, "
        "results=delete removes it and drops an external sink's table",
        responses=errors(400, 404, 409),
    )
    def delete_job(
        job: JobId,
        results: Annotated[ResultsOnDelete, Query(description="keep or delete")] = ResultsOnDelete.KEEP,
    ) -> JobDeleted:
        kept = gateway.delete(job, results)
        return JobDeleted(id=job, deleted=True, results=results, kept_in=None if kept is None else str(kept))

    @routes.post(
        "/v1/jobs/{job}/stop",
        summary="stop a job at a micro-batch boundary (no new batch starts)",
        responses=errors(400, 404, 409),
    )
    def stop(job: JobId) -> JobStatus:
        return gateway.status(gateway.stop(job))

    @routes.post(
        "/v1/jobs/{job}/restart",
        summary="start a stopped or failed job again on its checkpoint",
        responses=errors(400, 404, 409, 429),
    )
    def restart(job: JobId) -> JobStatus:
        return gateway.status(gateway.restart(job))

    @routes.get(
        "/v1/jobs/{job}/explain",
        response_class=PlainTextResponse,
        summary="the job's plan explained",
        responses={
            200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
            **{
                code: {
                    **item,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
                }
                for code, item in errors(400, 404).items()
            },
        },
    )
    def explain(job: JobId) -> PlainTextResponse:
        return PlainTextResponse(gateway.explain(job))

    return routes
