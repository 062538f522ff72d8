"""A state directory saved as a savepoint: the transaction behind ``upsertmat savepoint``.

:func:`take_savepoint` opens a ``replay --state-dir`` directory with the keys, strategy, backend
and TTL its manifest records (a run killed after its final commit is completed as a rerun
would complete it), attaches its state and writes a backend-independent savepoint
(:func:`upsertmat.impls.lifecycle.write_savepoint`): per key group, each context key's elements
in insertion order with their stamps, plus the clock, the keys, the TTL settings and the stream
position (``extra.lines``, the runs, the arity, and the key groups of a directory restored as
one instance of several).

The savepoint is written whole or not at all (lifecycle's own guarantee); the state directory
is only read. The errors are the persistence layer's (:class:`~.errors.StateDirError`,
:class:`~.errors.StateDirIOError`, :class:`~.errors.UnsupportedStateDir` for a request the
caller can change) and the savepoint's (:class:`~upsertmat.impls.lifecycle.SavepointError`).
O(state size).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...spec import Keys, Materializer
from ..lifecycle import DEFAULT_MAX_PARALLELISM, Partition, SavepointError, export_state, write_savepoint
from ..settings import Settings
from .errors import StateDirError, StateDirIOError, UnsupportedStateDir
from .failures import AGAIN, classified, close_quietly
from .session import StateSession

Create = Callable[[Keys, Settings], Materializer]


@dataclass(frozen=True)
class Saved:
    """What a savepoint holds: ``keys`` context keys and ``elements`` elements in ``files`` key
    group files, at stream line ``lines``; ``warning``: closing the state failed after the
    savepoint was written (None: it did not)."""

    path: Path
    keys: int
    elements: int
    files: int
    lines: int
    warning: str | None = None


def key_groups(path: Path, partition: Partition | None, max_parallelism: int | None) -> int:
    """The key groups of the savepoint: ``max_parallelism``, else the default; a state
    directory restored as one instance keeps its own (another would scatter its keys over
    groups it does not own): asking for another is refused (UnsupportedStateDir)."""
    if partition is None:
        return max_parallelism or DEFAULT_MAX_PARALLELISM
    if max_parallelism not in (None, partition.max_parallelism):
        raise UnsupportedStateDir(
            f"{path} is instance {partition.index} of {partition.parallelism} of "
            f"{partition.max_parallelism} key groups (it was restored so): its savepoint has those key "
            f"groups; omit --max-parallelism (or give {partition.max_parallelism})"
        )
    return partition.max_parallelism


def take_savepoint(
    path: Path,
    output: Path,
    settings: Settings,
    create: Create,
    *,
    ttl_given: bool = False,
    max_parallelism: int | None = None,
) -> Saved:
    """Write the savepoint of the state directory ``path`` to ``output`` (a new directory).

    ``settings``: what the caller asked for; the keys, strategy, backend and TTL come from the
    directory (``ttl_given``: the caller set a TTL, which must then be the directory's).
    ``create`` builds the materializer. See the module docstring."""
    with StateSession.existing(path, settings, ttl_given=ttl_given) as session:
        if session.settings.conflict.compacting:
            raise UnsupportedStateDir(
                f"{path} holds ON CONFLICT DO {session.settings.conflict.value} state, whose "
                "savepoints have their own format that this command does not write yet; use the library "
                "(upsertmat.impls.conflict.savepoint.write_savepoint), or keep the state directory"
            )
        groups = key_groups(path, session.partition, max_parallelism)
        materializer = create(session.keys, session.settings)
        try:
            saved = _save(session, materializer, path, output, groups)
        except BaseException:
            with contextlib.suppress(Exception):  # the error being raised is the one to report
                materializer.close()
            raise
        warning = close_quietly(materializer, "the savepoint is written")
    return Saved(output, saved[0], saved[1], saved[2], saved[3], warning)


def _save(
    session: StateSession, materializer: Materializer, path: Path, output: Path, groups: int
) -> tuple[int, int, int, int]:
    """Attach, check the position, write; (keys, elements, files, stream line)."""
    with classified(materializer, path):
        position = session.attach(materializer)
    if not position.done:
        raise StateDirError(
            f"the last run on {path} was killed or stopped and not yet finished; run the "
            "same command again first (or go on with --stream-line), so the savepoint has a definite "
            "stream position"
        )
    manifest = session.manifest
    assert manifest is not None
    extra: dict[str, object] = {
        "lines": position.lines,
        "arity": session.arity,
        "runs": [run.to_json() for run in manifest.runs],
    }
    if session.partition is not None:
        extra["partition"] = session.partition.to_json()
    try:
        with classified(materializer, path, f"{AGAIN}; no savepoint was written"):
            written = write_savepoint(
                output,
                export_state(materializer),
                keys=session.keys,
                now=position.now,
                ttl=session.settings.ttl,
                max_parallelism=groups,
                retract_misses=position.misses,
                source={"strategy": manifest.strategy, "backend": manifest.backend, "parallelism": 1},
                extra=extra,
            )
    except SavepointError:
        raise
    except OSError as error:
        raise StateDirIOError(
            f"cannot write savepoint {output}: {error.strerror or error}; nothing of it is "
            f"left: free space (or fix the device) and {AGAIN}"
        ) from None
    except (ArithmeticError, AssertionError, LookupError, TypeError, ValueError) as error:
        raise StateDirError(
            f"damaged state in {path}: it does not hold a valid {manifest.strategy} layout "
            f"({type(error).__name__}: {error}); no savepoint was written"
        ) from None
    return written.key_count, written.element_count, len(written.files), position.lines
