"""``upsertmat gateway``: a long-running service, one Spark session and many jobs, talked to
over a versioned REST API (docs/gateway.md). Modules: ``settings`` (the service's bounds and
bind rules), ``contract`` (the request and response models, shared with ``upsertmat client``),
``lifecycle`` (job states and their transitions, as data), ``registry`` (the on-disk job
registry), ``confine`` (paths under the data root, away from the gateway's own files),
``service`` (sessions, jobs, results), ``app`` (the FastAPI routes, the credential guard),
``metrics`` (Prometheus metrics), ``page`` (the status page), ``server``
(uvicorn, announcing the address once it accepts, signals)."""
