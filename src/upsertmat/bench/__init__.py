"""``upsertmat bench``: the FLIP-544 micro-benchmark of the materializer strategies.

Modules: ``workload`` (the seeded change list), ``runner`` (cells, repetitions, timing,
budget), ``stats`` (median and spread), ``goals`` (the issue's performance goals),
``report`` (CSV, JSON, tables), ``plot`` (one PNG per backend), ``progress`` (stderr);
the command is :mod:`upsertmat.commands.bench`.
"""
