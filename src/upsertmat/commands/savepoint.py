"""``upsertmat savepoint``, ``upsertmat restore`` and ``upsertmat inspect``: canonical savepoints.

``savepoint`` reads a ``replay --state-dir`` directory (any strategy and backend) and writes a
backend-independent savepoint (:mod:`upsertmat.impls.lifecycle.savepoint`): per key group,
each context key's elements in insertion order with their stamps, plus the clock, the keys,
the equalizer identity, TTL settings and the stream position (``extra.lines``).

``restore`` builds a new state directory from a savepoint, for any strategy and backend
(migration) and for instance ``--index`` of ``--parallelism`` (rescaling: the instance gets
exactly the key groups of its range). ``replay --state-dir NEWDIR`` then continues the
stream at the savepoint's line with identical output.

``inspect`` verifies a savepoint completely and prints its manifest summary as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from upsertmat.commands.options import (
    add_config_arguments,
    create_materializer,
    positive_int,
    settings_from_args,
)
from upsertmat.errors import CliError, ExitCode
from upsertmat.impls import ConfigError, Settings
from upsertmat.impls.lifecycle import (
    DEFAULT_MAX_PARALLELISM,
    MAX_MAX_PARALLELISM,
    Savepoint,
    SavepointError,
)
from upsertmat.impls.lifecycle.errors import SavepointIOError
from upsertmat.impls.persistence.restore import restore_savepoint
from upsertmat.impls.persistence.savepoint import take_savepoint
from upsertmat.stdout import cut_short, write_data

EXIT_CODES = (
    "exit codes: 0 ok, 2 usage or configuration error, 3 state directory or savepoint refused, 4 I/O error\n"
    "  (a full disk, a device error), 70 internal error."
)


def _index(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``savepoint``, ``restore`` and ``inspect``."""
    save = subparsers.add_parser(
        "savepoint",
        help="write a backend-independent savepoint of a replay --state-dir",
        description="Write the state of a replay --state-dir (any strategy/backend) as a canonical "
        "savepoint.",
        epilog=f"example: upsertmat savepoint --state-dir st -o sp1\n{EXIT_CODES}\n"
        "TTL settings come from the state directory; giving other ones is refused.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    save.add_argument(
        "--state-dir", type=Path, required=True, metavar="DIR", help="the state directory to save"
    )
    save.add_argument(
        "-o", "--output", type=Path, required=True, metavar="SP", help="new savepoint directory"
    )
    save.add_argument(
        "--max-parallelism",
        type=positive_int,
        metavar="N",
        help=f"key groups, at most {MAX_MAX_PARALLELISM} (default {DEFAULT_MAX_PARALLELISM}; for a state "
        "directory restored as one instance of several, its own); the highest parallelism it can restore at",
    )
    add_config_arguments(save)
    save.set_defaults(run=run_savepoint)

    restore = subparsers.add_parser(
        "restore",
        help="create a replay --state-dir from a savepoint (migration, rescaling)",
        description="Create a new replay state directory from a savepoint, for any strategy and backend\n"
        "(migration) and any parallelism up to the savepoint's max parallelism (rescaling).",
        epilog="examples:\n  upsertmat restore sp1 --state-dir st2 --strategy MAP --backend rocksdb\n"
        "  upsertmat restore sp1 --state-dir part0 --parallelism 2 --index 0\n"
        f"{EXIT_CODES}\nTTL settings come from the savepoint; giving other ones is refused.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    restore.add_argument("savepoint", type=Path, metavar="SP", help="the savepoint directory")
    restore.add_argument(
        "--state-dir",
        type=Path,
        required=True,
        metavar="DIR",
        help="the state directory to create (new or empty)",
    )
    restore.add_argument(
        "--parallelism",
        type=positive_int,
        default=1,
        metavar="N",
        help="instances (default 1); the directory records the key groups of its instance, and a "
        "replay into it applies only the changes routed to them",
    )
    restore.add_argument(
        "--index", type=_index, default=0, metavar="I", help="this instance, 0..N-1 (default 0)"
    )
    add_config_arguments(restore)
    restore.set_defaults(run=run_restore)

    inspect = subparsers.add_parser(
        "inspect",
        help="verify a savepoint and print its summary as JSON",
        description="Verify every file of a savepoint (checksums, structure, keys) and print its "
        "manifest summary.",
        epilog="example: upsertmat inspect sp1 | jq .extra.lines\n"
        f"{EXIT_CODES.removesuffix('.')}, 141 stdout's reader went away.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inspect.add_argument("savepoint", type=Path, metavar="SP", help="the savepoint directory")
    inspect.set_defaults(run=run_inspect)


def _settings(args: argparse.Namespace) -> Settings:
    try:
        return settings_from_args(args)
    except ConfigError as error:
        raise CliError(str(error)) from None


def _savepoint_error(error: SavepointError) -> CliError:
    """A refused savepoint (exit 3), or one the file system failed to read or write (exit 4)."""
    if isinstance(error, SavepointIOError):
        return CliError(
            f"{error}; fix the device (or free space) and run the same command again", ExitCode.IO
        )
    return CliError(str(error), ExitCode.STATE_DIR)


def _explicit_ttl(args: argparse.Namespace) -> bool:
    """True when the command line sets a TTL option (``--ttl`` or a ``--set`` of a ttl key)."""
    return args.ttl is not None or any(".ttl" in text.partition("=")[0] for text in args.settings)


def run_savepoint(args: argparse.Namespace) -> int:
    """Execute ``upsertmat savepoint``: the transaction is
    :func:`~upsertmat.impls.persistence.savepoint.take_savepoint`."""
    if args.max_parallelism is not None and args.max_parallelism > MAX_MAX_PARALLELISM:
        raise CliError(f"--max-parallelism must be at most {MAX_MAX_PARALLELISM}, got {args.max_parallelism}")
    try:
        saved = take_savepoint(
            args.state_dir,
            args.output,
            _settings(args),
            create_materializer,
            ttl_given=_explicit_ttl(args),
            max_parallelism=args.max_parallelism,
        )
    except SavepointError as error:
        raise _savepoint_error(error) from None
    if saved.warning is not None:
        print(f"upsertmat savepoint: warning: {saved.warning}", file=sys.stderr)
    print(
        f"upsertmat savepoint: wrote {saved.path}: {saved.keys} key(s), {saved.elements} "
        f"element(s) in {saved.files} key group file(s), stream line {saved.lines}",
        file=sys.stderr,
    )
    return int(ExitCode.OK)


def run_restore(args: argparse.Namespace) -> int:
    """Execute ``upsertmat restore``: the transaction is
    :func:`~upsertmat.impls.persistence.restore.restore_savepoint` (all or nothing).

    Everything the restore needs of the savepoint is checked when it is opened (the same
    checks as ``inspect``): its keys and equalizer, the TTL settings and the replay position.
    """
    try:
        savepoint = Savepoint.open(args.savepoint)
    except SavepointError as error:
        raise _savepoint_error(error) from None
    sp = savepoint.manifest
    if args.index >= args.parallelism:
        raise CliError(f"--index must be below --parallelism ({args.parallelism}), got {args.index}")
    if args.parallelism > sp.max_parallelism:
        raise CliError(
            f"--parallelism {args.parallelism} exceeds the savepoint's max parallelism {sp.max_parallelism} "
            f"({args.savepoint})"
        )
    settings = _settings(args)
    if not _explicit_ttl(args) and args.config is None:
        settings = replace(settings, ttl=sp.ttl)
    try:
        restored = restore_savepoint(
            savepoint,
            args.state_dir,
            settings,
            create_materializer,
            parallelism=args.parallelism,
            index=args.index,
        )
    except SavepointError as error:
        raise _savepoint_error(error) from None
    if restored.warning is not None:
        print(f"upsertmat restore: warning: {restored.warning}", file=sys.stderr)
    owned = "all key groups" if restored.partition is None else str(restored.partition)
    done = restored.settings
    print(
        f"upsertmat restore: {args.state_dir} holds {restored.keys} key(s) of {args.savepoint} ({owned}, "
        f"{done.strategy.value}/{done.backend.value}); replay continues at stream line {restored.lines}",
        file=sys.stderr,
    )
    return int(ExitCode.OK)


def run_inspect(args: argparse.Namespace) -> int:
    """Execute ``upsertmat inspect``: the same checks as ``restore`` (every field of the
    manifest, every data file), then the summary."""
    try:
        savepoint = Savepoint.open(args.savepoint)
        savepoint.verify()
    except SavepointError as error:
        raise _savepoint_error(error) from None
    summary = savepoint.manifest.to_json()
    summary["files"] = len(savepoint.manifest.files)
    summary["keys"] = savepoint.manifest.key_count
    summary["elements"] = savepoint.manifest.element_count
    summary["verified"] = True
    write_data(json.dumps(summary, indent=2) + "\n")
    return int(ExitCode.CLOSED_PIPE if cut_short() else ExitCode.OK)
