"""``upsertmat bench``: the FLIP-544 micro-benchmark of the materializer strategies.

Modules: ``workload`` (the seeded change list), ``runner`` (cells, repetitions, timing,
budget), ``stats`` (median and spread), ``goals`` (the issue's performance goals),
``report`` (CSV, JSON, tables), ``plot`` (one PNG per backend), ``progress`` (stderr);
the command's option types ``options``, its defaults ``presets`` and what a run measures
``plans`` (the grid's plan, the pipeline and scale benchmarks); the command,
:mod:`upsertmat.commands.bench`, only wires its options to them.
"""
