"""The command line's commands, one thin module each over the domain packages.

Each module exposes ``add_parser(subparsers)`` (``plan`` exposes one per command), which
registers the command's parser and sets ``run`` to a function ``(argparse.Namespace) -> int``
returning the exit code. :mod:`upsertmat.cli` lists them. Shared pieces: :mod:`.options`
(``--config``/``--set`` and the shortcuts), :mod:`.progress` (the progress line).
"""
