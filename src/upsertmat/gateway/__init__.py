"""``upsertmat gateway``: a long-running service, one Spark session and many jobs, talked to
over a versioned REST API (docs/gateway.md). Modules: ``settings`` (the service's bounds and
bind rules), ``registry`` (the on-disk job registry), ``confine`` (paths under the data root),
``service`` (sessions, jobs, results), ``app`` (the FastAPI routes), ``page`` (the status
page), ``server`` (uvicorn, signals)."""
