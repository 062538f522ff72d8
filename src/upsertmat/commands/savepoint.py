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
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from upsertmat.commands.options import (
    add_config_arguments,
    create_materializer,
    positive_int,
    settings_from_args,
)
from upsertmat.errors import CliError, ExitCode, StateDirError
from upsertmat.impls import ConfigError, Settings
from upsertmat.impls.lifecycle import (
    DEFAULT_MAX_PARALLELISM,
    Savepoint,
    SavepointError,
    export_state,
    write_savepoint,
)
from upsertmat.impls.lifecycle.errors import SavepointIOError
from upsertmat.impls.persistence.session import StateSession
from upsertmat.impls.state.errors import StateError, StorageError, storage_failure
from upsertmat.spec import Materializer

EXIT_CODES = (
    "exit codes: 0 ok, 2 usage or configuration error, 3 state directory or savepoint refused, 4 I/O error."
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
        default=DEFAULT_MAX_PARALLELISM,
        metavar="N",
        help=f"key groups (default {DEFAULT_MAX_PARALLELISM}); the highest parallelism it can restore at",
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
    restore.add_argument("--state-dir", type=Path, required=True, metavar="DIR", help="new (empty) state dir")
    restore.add_argument(
        "--parallelism", type=positive_int, default=1, metavar="Q", help="instances (default 1)"
    )
    restore.add_argument(
        "--index", type=_index, default=0, metavar="I", help="this instance, 0..Q-1 (default 0)"
    )
    add_config_arguments(restore)
    restore.set_defaults(run=run_restore)

    inspect = subparsers.add_parser(
        "inspect",
        help="verify a savepoint and print its summary as JSON",
        description="Verify every file of a savepoint (checksums, structure, keys) and print its "
        "manifest summary.",
        epilog=EXIT_CODES,
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


def _state_error(error: StateError, where: Path, then: str) -> CliError | StateDirError:
    """A state error met on the state directory ``where``: a storage failure (a full disk, a
    device error) is exit 4, anything else refused state (exit 3); ``then`` says what to do."""
    if isinstance(error, StorageError):
        return CliError(f"{error}; free space (or fix the device) and {then}", ExitCode.IO)
    message = str(error)
    if f"{where}{os.sep}" not in message and f"{where} " not in message:  # name the directory once
        message = f"{where}: {message}"
    return StateDirError(message)


@contextlib.contextmanager
def _state_errors(materializer: Materializer | None, where: Path, then: str) -> Iterator[None]:
    """Turn what the state of ``materializer`` (in ``where``) raises into one-line errors: a
    storage engine's own error classified first (:func:`storage_failure`)."""
    try:
        yield
    except StateError as error:
        raise _state_error(error, where, then) from None
    except OSError:
        raise  # the file system of what is written (the savepoint), not of the state
    except Exception as error:
        failure = storage_failure(getattr(materializer, "backend", None), error)
        if failure is None:
            raise
        raise _state_error(failure, where, then) from None


def _close(materializer: Materializer, command: str) -> None:
    """Close the state; what was committed is safe whatever closing says: warn only."""
    try:
        materializer.close()
    except Exception as error:
        failure = storage_failure(getattr(materializer, "backend", None), error)
        if failure is None:
            raise
        print(f"upsertmat {command}: warning: closing the state failed ({failure})", file=sys.stderr)


def run_savepoint(args: argparse.Namespace) -> int:
    """Execute ``upsertmat savepoint``."""
    then = "run the same command again"
    with StateSession.existing(args.state_dir, _settings(args), ttl_given=_explicit_ttl(args)) as session:
        if session.settings.conflict.compacting:
            raise CliError(
                f"{args.state_dir} holds ON CONFLICT DO {session.settings.conflict.value} state, whose "
                "savepoints have their own format that this command does not write yet; use the library "
                "(upsertmat.impls.conflict.savepoint.write_savepoint), or keep the state directory"
            )
        materializer = create_materializer(session.keys, session.settings)
        try:
            with _state_errors(materializer, args.state_dir, then):
                position = session.attach(materializer)
            if not position.done:
                raise StateDirError(
                    f"the last run on {args.state_dir} was killed or stopped and not yet finished; run the "
                    "same command again first (or go on with --stream-line), so the savepoint has a definite "
                    "stream position"
                )
            manifest = session.manifest
            assert manifest is not None
            try:
                with _state_errors(materializer, args.state_dir, f"{then}; no savepoint was written"):
                    written = write_savepoint(
                        args.output,
                        export_state(materializer),
                        keys=session.keys,
                        now=position.now,
                        ttl=session.settings.ttl,
                        max_parallelism=args.max_parallelism,
                        retract_misses=position.misses,
                        source={"strategy": manifest.strategy, "backend": manifest.backend, "parallelism": 1},
                        extra={
                            "lines": position.lines,
                            "arity": session.arity,
                            "runs": [run.to_json() for run in manifest.runs],
                        },
                    )
            except SavepointError as error:
                raise _savepoint_error(error) from None
            except OSError as error:
                raise CliError(
                    f"cannot write savepoint {args.output}: {error.strerror or error}; nothing of it is "
                    f"left: free space (or fix the device) and {then}",
                    ExitCode.IO,
                ) from None
            except (ArithmeticError, AssertionError, LookupError, TypeError, ValueError) as error:
                raise StateDirError(
                    f"damaged state in {args.state_dir}: it does not hold a valid {manifest.strategy} layout "
                    f"({type(error).__name__}: {error}); no savepoint was written"
                ) from None
        finally:
            _close(materializer, "savepoint")
    print(
        f"upsertmat savepoint: wrote {args.output}: {written.key_count} key(s), {written.element_count} "
        f"element(s) in {len(written.files)} key group file(s), stream line {position.lines}",
        file=sys.stderr,
    )
    return int(ExitCode.OK)


def run_restore(args: argparse.Namespace) -> int:
    """Execute ``upsertmat restore``.

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
    explicit_ttl = _explicit_ttl(args)
    settings = _settings(args)
    if not explicit_ttl and args.config is None:
        settings = replace(settings, ttl=sp.ttl)
    keys, replay = sp.keys, sp.replay
    with StateSession(args.state_dir, keys, settings, replay.arity) as session:
        if not session.fresh:
            raise StateDirError(f"{args.state_dir} already holds replay state; restore into a new directory")
        settings = session.settings
        materializer = create_materializer(keys, settings)
        try:
            with _state_errors(materializer, args.state_dir, "run the same command again"):
                session.attach(materializer)
        except StateDirError as error:
            # Refused before this restore wrote anything (a database holding committed state
            # without a manifest): nothing here is ours to remove.
            _close(materializer, "restore")
            if type(error) is not StateDirError:
                raise
            raise StateDirError(
                f"{error}. If a restore into {args.state_dir} was killed at its very end, remove the "
                "directory and run the restore again"
            ) from None
        except BaseException:
            _close(materializer, "restore")
            raise
        try:
            with _state_errors(materializer, args.state_dir, "run the same command again"):
                try:
                    restored = savepoint.load_into(
                        materializer, keys, ttl=settings.ttl, parallelism=args.parallelism, index=args.index
                    )
                except SavepointError as error:
                    raise _savepoint_error(error) from None
                session.restored(
                    materializer,
                    lines=replay.lines,
                    now=sp.now,
                    misses=sp.retract_misses if args.index == 0 else 0,
                    runs=replay.runs,
                )
        except BaseException:
            # A failed restore leaves no half-restored state behind: the directory is fresh
            # again, so the same command can run again.
            _close(materializer, "restore")
            if session.fresh:
                session.abandon()
            raise
        _close(materializer, "restore")
    print(
        f"upsertmat restore: {args.state_dir} holds {restored} key(s) of {args.savepoint} "
        f"(instance {args.index} of {args.parallelism}, {settings.strategy.value}/{settings.backend.value}); "
        f"replay continues at stream line {replay.lines}",
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
    print(json.dumps(summary, indent=2))
    return int(ExitCode.OK)
