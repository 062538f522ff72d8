"""A Hypothesis state machine: a compacting implementation and the model in lockstep.

Rules add and retract rows over several sink keys (the pools and bundles of
:mod:`.machine`), put watermark lines (newer, equal and older times) between them, and move
the state: ``savepoint_rescale`` restores a savepoint at another parallelism and merges the
shares back, ``restart`` closes the implementation and reopens it (a durable backend from its
own directory; heap through :meth:`~upsertmat.impls.conflict.CompactingMaterializer.export_keys`
/ ``import_keys``, as a checkpoint would), ``migrate`` exports the state into another backend.
Whether the keys have an upsert key, the behaviour (NOTHING or ERROR) and, under ERROR, whether
conflicts are skipped are drawn once. After every line: outputs, conflicts, misses and the whole
state equal the model's, and after every successful watermark the state is bounded (at most one
row per key, nothing pending). A failed ERROR watermark changes nothing, so the run goes on.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, cast

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, rule

from ...impls.conflict import CompactingMaterializer
from ...impls.conflict.savepoint import restore_savepoint, write_savepoint
from ...spec import Change, ConflictBehavior, ConflictModel, JsonValue, Keys, Row, RowKind
from ..generators import KEYS_WITH_UPSERT_KEY, KEYS_WITHOUT_UPSERT_KEY
from ..machine import _LEVELS, _PAYLOADS, adds, retracts, rows
from .checks import KeyState, Line, normalized, step_and_compare

BACKENDS = ("heap", "rocksdb", "lmdb")
DurableMaker = Callable[[Keys, ConflictBehavior, str, Path | None], CompactingMaterializer]
"""Builds an implementation on a backend (``heap``, ``rocksdb``, ``lmdb``), in a state directory."""


class ConflictMachine(RuleBasedStateMachine):
    """Model vs implementation; bind a maker with :meth:`bound_to`."""

    added = Bundle("added")
    backend: ClassVar[str] = "heap"

    def __init__(self) -> None:
        super().__init__()
        self.keys: Keys = KEYS_WITHOUT_UPSERT_KEY
        self.behavior = ConflictBehavior.NOTHING
        self.skip = False
        self.model = ConflictModel(self.keys, self.behavior)
        self.impl: CompactingMaterializer | None = None
        self.impl_backend = self.backend
        self.now = 0
        self.lines = 0
        self.root = Path(tempfile.mkdtemp(prefix="upsertmat-conflict-machine-"))
        self.dirs = 0

    def make(
        self, keys: Keys, behavior: ConflictBehavior, backend: str, state_dir: Path | None
    ) -> CompactingMaterializer:
        """Build an implementation (overridden by :meth:`bound_to`)."""
        raise NotImplementedError("bind a maker with ConflictMachine.bound_to(maker, backend)")

    @classmethod
    def bound_to(cls, maker: DurableMaker, backend: str, name: str = "") -> type[ConflictMachine]:
        """A subclass whose :meth:`make` is ``maker`` and whose implementation starts on ``backend``."""

        def make(
            self: ConflictMachine,
            keys: Keys,
            behavior: ConflictBehavior,
            backend: str,
            state_dir: Path | None,
        ) -> CompactingMaterializer:
            return maker(keys, behavior, backend, state_dir)

        bound = type(
            name.replace(".", "_") or f"{cls.__name__}Bound", (cls,), {"make": make, "backend": backend}
        )
        return cast("type[ConflictMachine]", bound)

    def _new_dir(self) -> Path:
        self.dirs += 1
        return self.root / f"state-{self.dirs}"

    def _open(self, backend: str, state_dir: Path | None) -> CompactingMaterializer:
        impl = self.make(self.keys, self.behavior, backend, state_dir)
        impl.skip_conflicts = self.skip
        return impl

    def line(self, line: Line) -> None:
        """Feed one line to both and compare everything (:func:`step_and_compare`)."""
        assert self.impl is not None
        step_and_compare(
            self.impl, self.model, self.lines, line, f"{self.behavior.value} on {self.impl_backend}"
        )
        self.lines += 1

    # -- rules ---------------------------------------------------------------------------------

    @initialize(upsert_key=st.booleans(), behavior=st.sampled_from(ConflictBehavior), skip=st.booleans())
    def open(self, upsert_key: bool, behavior: ConflictBehavior, skip: bool) -> None:
        self.keys = KEYS_WITH_UPSERT_KEY if upsert_key else KEYS_WITHOUT_UPSERT_KEY
        self.behavior = ConflictBehavior.NOTHING if behavior is ConflictBehavior.DEDUPLICATE else behavior
        self.skip = skip and self.behavior is ConflictBehavior.ERROR
        self.model = ConflictModel(self.keys, self.behavior, skip_conflicts=self.skip)
        self.impl_dir = self._new_dir()
        self.impl = self._open(self.backend, self.impl_dir)

    @rule(target=added, row=rows, kind=adds)
    def add(self, row: Row, kind: RowKind) -> Row:
        self.line(Change(kind, row))
        return row

    @rule(row=added, kind=adds)
    def add_again(self, row: Row, kind: RowKind) -> None:
        self.line(Change(kind, row))

    @rule(row=added, kind=retracts)
    def retract_added(self, row: Row, kind: RowKind) -> None:
        self.line(Change(kind, row))

    @rule(row=added, level=st.sampled_from(_LEVELS), payload=st.sampled_from(_PAYLOADS), kind=retracts)
    def retract_variant(self, row: Row, level: JsonValue, payload: JsonValue, kind: RowKind) -> None:
        self.line(Change(kind, (row[0], row[1], level, payload)))

    @rule(row=added, level=st.sampled_from(_LEVELS), payload=st.sampled_from(_PAYLOADS))
    def update_added(self, row: Row, level: JsonValue, payload: JsonValue) -> None:
        self.line(Change(RowKind.UPDATE_AFTER, (row[0], row[1], level, payload)))

    @rule(row=rows, kind=retracts)
    def retract_any(self, row: Row, kind: RowKind) -> None:
        self.line(Change(kind, row))

    @rule(delta=st.integers(-2, 3))
    def watermark(self, delta: int) -> None:
        """A time line: newer (a watermark), equal or older (nothing may happen)."""
        self.line(self.now + delta)
        self.now = max(self.now, self.now + delta)

    @rule()
    def restart(self) -> None:
        """Close and reopen: a durable backend from its directory, heap through export/import."""
        assert self.impl is not None
        misses = self.impl.retract_misses
        if self.impl_backend == "heap":
            state, watermark = list(self.impl.export_keys()), self.impl.last_watermark
            self.impl.close()
            self.impl = self._open("heap", None)
            self.impl.import_keys(state, watermark)
        else:
            self.impl.close()
            self.impl = self._open(self.impl_backend, self.impl_dir)
        self.impl.retract_misses = misses  # a driver keeps the count (replay: in its position record)

    @rule(target_backend=st.sampled_from(BACKENDS))
    def migrate(self, target_backend: str) -> None:
        """Move the whole state (and the last watermark) into a fresh implementation on ``target_backend``."""
        assert self.impl is not None
        misses = self.impl.retract_misses
        state, watermark = list(self.impl.export_keys()), self.impl.last_watermark
        self.impl.close()
        self.impl_backend, self.impl_dir = target_backend, self._new_dir()
        self.impl = self._open(target_backend, self.impl_dir)
        self.impl.import_keys(state, watermark)
        self.impl.retract_misses = misses

    @rule(
        parallelism=st.integers(1, 4),
        backends=st.lists(st.sampled_from(BACKENDS), min_size=5, max_size=5),
    )
    def savepoint_rescale(self, parallelism: int, backends: list[str]) -> None:
        """Take a savepoint, restore it at ``parallelism`` (each instance its key groups, on the
        drawn backends), check the shares partition the state, and merge them into one instance."""
        assert self.impl is not None
        misses = self.impl.retract_misses
        before = list(self.impl.export_keys())
        savepoint = self._new_dir()
        write_savepoint(self.impl, savepoint)
        self.impl.close()
        self.impl = None
        shares: list[list[KeyState]] = []
        watermark = None
        for index in range(parallelism):
            part = self._open(backends[index], self._new_dir())
            try:
                restore_savepoint(part, savepoint, index=index, parallelism=parallelism)
                shares.append(list(part.export_keys()))
                watermark = part.last_watermark
            finally:
                part.close()
        merged = sorted(state for share in shares for state in share)
        assert normalized(merged) == normalized(before), "the savepoint's shares do not partition the state"
        self.impl_backend, self.impl_dir = backends[-1], self._new_dir()
        self.impl = self._open(self.impl_backend, self.impl_dir)
        self.impl.import_keys(merged, watermark)
        self.impl.retract_misses = misses

    def teardown(self) -> None:
        if self.impl is not None:
            self.impl.close()
            self.impl = None
        shutil.rmtree(self.root, ignore_errors=True)
