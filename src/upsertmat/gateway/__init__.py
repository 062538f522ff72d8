"""``upsertmat gateway``: a long-running service, one Spark session and many jobs, talked to
over a versioned REST API (docs/gateway.md).

The domain service, without HTTP: ``service`` (the :class:`~.service.Gateway`: a job's life,
putting the parts together), ``sessions`` (configuration layers), ``documents`` (a submitted job
file or plan, read once), ``resolver`` (a job's layers and paths), ``runtime`` (the job threads
and what they know), ``paging`` (result pages and their tokens), ``errors`` (the domain errors),
``registry`` (the on-disk job registry), ``lifecycle`` (job states and their transitions, as
data), ``confine`` (paths under the data root, away from the gateway's own files), ``waiting``
(a job's files not read yet), ``encoding`` (strict JSON, times), ``settings`` (bounds and bind
rules), ``contract`` (the request and response models, shared with ``upsertmat client``).

Over HTTP: ``routes`` (one router per resource; HTTP errors made in ``routes.errors`` only),
``app`` (FastAPI, the routers), ``guard`` (the credential check and body bound; the status
page's logins), ``metrics`` (Prometheus metrics), ``page`` (the status page), ``server``
(uvicorn, announcing the address once it accepts, signals), ``tls`` (the certificate and key
checked before anything starts; plain HTTP on the TLS port noticed)."""
