"""The gateway's HTTP routes, one router per resource over the domain service
(:class:`upsertmat.gateway.service.Gateway`): ``info`` (version, master, bounds), ``page`` (the
status page and its one-time login links), ``sessions``, ``jobs`` (submit, list, status, stop,
restart, delete, explain), ``results`` (table pages and the changelog), ``metrics`` (Prometheus,
and a job's recent batches for the page's plots). Request and response models are the
contract's (:mod:`upsertmat.gateway.contract`); HTTP errors are made only in
:mod:`.errors`, from the service's domain errors. Each module's ``router(...)`` builds its
router for one gateway (its bounds appear in the schema)."""
