"""The command line's commands, one thin module each over the domain packages.

Each module exposes ``add_parser(subparsers)`` (``plan`` exposes one per command), which
registers the command's parser and sets ``run`` to a function ``(argparse.Namespace) -> int``
returning the exit code. :mod:`upsertmat.cli` lists them. Shared pieces: :mod:`.options`
(``--config``/``--set``, the shortcuts and the argparse types) and :mod:`.job_options` (the
job overrides and run options of ``run``, ``compile-plan``, ``execute-plan`` and ``gateway``).
A command's domain logic lives in its package (``bench``'s option types, presets and plans in
:mod:`upsertmat.bench`), not here.
"""
