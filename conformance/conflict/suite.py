"""The reusable ON CONFLICT conformance suite: subclass :class:`ConflictMaterializerTests`.

A test module needs three lines::

    from upsertmat.conformance import ConflictMaterializerTests

    class TestConflictRocksdb(ConflictMaterializerTests):
        backend = "rocksdb"

or override :meth:`ConflictMaterializerTests.make` to build another implementation of
``ON CONFLICT DO ERROR | DO NOTHING``. What runs, under both behaviours: the scenario
catalogue (:mod:`.scenarios`, exact emissions), Hypothesis differential tests
against the model on generated streams with watermark lines (valid, upsert-style, tolerated;
ERROR also with conflicts skipped), per line, with the bounded-state property after every
watermark (:func:`~.checks.check_bounded`), and the state machine with restart and
migration between backends (:mod:`.machine`). Example counts follow the Hypothesis
profile like :class:`~.suite.MaterializerTests`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from ...impls import Settings
from ...impls.conflict import CompactingMaterializer
from ...impls.conflict import create as create_compacting
from ...impls.settings import Backend
from ...spec import ConflictBehavior, Keys, delete, insert
from ..generators import KEYS_WITHOUT_UPSERT_KEY, long_histories
from ..suite import run_property, scaled_settings
from .checks import check_lines_against_model, drive, opened
from .generators import WatermarkedStream, watermarked_streams
from .machine import ConflictMachine
from .scenarios import CONFLICT_SCENARIOS, ConflictScenario

BEHAVIORS = (ConflictBehavior.NOTHING, ConflictBehavior.ERROR)

PINNED_STREAMS: tuple[WatermarkedStream, ...] = (
    # Found by Hypothesis: a repeated time line is not a watermark, so the change before it
    # stays pending (the bounded-state check must only run after a real watermark).
    WatermarkedStream(KEYS_WITHOUT_UPSERT_KEY, (0, insert(1, "u1", 10, "a"), 0, insert(1, "u1", 10, "a"))),
    # A conflict that a later retraction resolves: ERROR fails at 1, changes nothing, succeeds at 2.
    WatermarkedStream(
        KEYS_WITHOUT_UPSERT_KEY, (insert(1, 0, 0, "a"), insert(1, 0, 0, "b"), 1, delete(1, 0, 0, "b"), 2)
    ),
)
"""Streams replayed first by :meth:`ConflictMaterializerTests.test_watermarked_streams`."""


def make_on(
    keys: Keys, behavior: ConflictBehavior, backend: str, state_dir: Path | None
) -> CompactingMaterializer:
    """The built-in compacting materializer on ``backend`` (heap ignores ``state_dir``)."""
    return create_compacting(keys, Settings(backend=Backend(backend), conflict=behavior, state_dir=state_dir))


class ConflictMaterializerTests:
    """The suite. Set ``backend`` (heap, rocksdb, lmdb) or override :meth:`make` and :meth:`make_on`."""

    backend: ClassVar[str] = "heap"
    examples_scale: ClassVar[float] = 1.0

    def make_on(
        self, keys: Keys, behavior: ConflictBehavior, backend: str, state_dir: Path | None
    ) -> CompactingMaterializer:
        """An implementation on ``backend`` in ``state_dir`` (the machine's restart and migrate)."""
        return make_on(keys, behavior, backend, state_dir)

    def make(self, keys: Keys, behavior: ConflictBehavior) -> CompactingMaterializer:
        """A fresh implementation on ``backend`` (a temporary database for byte backends)."""
        return self.make_on(keys, behavior, self.backend, None)

    def _name(self, test: str) -> str:
        return f"{type(self).__module__}.{type(self).__qualname__}.{test}"

    @pytest.mark.parametrize("behavior", BEHAVIORS, ids=[behavior.value for behavior in BEHAVIORS])
    @pytest.mark.parametrize(
        "scenario", CONFLICT_SCENARIOS, ids=[scenario.name for scenario in CONFLICT_SCENARIOS]
    )
    def test_scenario(self, scenario: ConflictScenario, behavior: ConflictBehavior) -> None:
        """Each catalogue scenario: the exact hand-written emissions (and where ERROR fails)."""
        expected, error_at = scenario.expected(behavior)
        with opened(self.make, scenario.keys, behavior) as materializer:
            emitted, failed_at = drive(materializer, scenario.lines)
            assert (emitted, failed_at) == (list(expected), error_at), f"scenario {scenario.name!r}"
            if failed_at is None:
                assert materializer.retract_misses == scenario.misses, f"scenario {scenario.name!r}: misses"

    @pytest.mark.parametrize(
        ("behavior", "skip"),
        [(ConflictBehavior.NOTHING, False), (ConflictBehavior.ERROR, False), (ConflictBehavior.ERROR, True)],
        ids=["NOTHING", "ERROR", "ERROR-skip"],
    )
    def test_watermarked_streams(self, behavior: ConflictBehavior, skip: bool) -> None:
        """Streams with watermark lines: equal to the model line by line, bounded after each watermark."""
        run_property(
            self._name(f"streams_{behavior.value}_{skip}"),
            watermarked_streams(),
            lambda stream: check_lines_against_model(
                self.make, stream.keys, stream.lines, behavior, skip_conflicts=skip
            ),
            scale=self.examples_scale,
            examples=PINNED_STREAMS,
        )

    def test_long_histories(self) -> None:
        """Hundreds of events on one sink key, with watermarks between them (NOTHING)."""
        run_property(
            self._name("long"),
            watermarked_streams(long_histories(min_operations=50, max_operations=150)),
            lambda stream: check_lines_against_model(
                self.make, stream.keys, stream.lines, ConflictBehavior.NOTHING
            ),
            weight=0.1,
            scale=self.examples_scale,
        )

    def test_state_machine(self) -> None:
        """Model and implementation in lockstep, with restart and migration between backends."""
        current = scaled_settings(0.5, self.examples_scale)
        run_state_machine_as_test(  # type: ignore[no-untyped-call, unused-ignore]
            ConflictMachine.bound_to(self.make_on, self.backend, self._name("machine")),
            settings=settings(current, stateful_step_count=30),
        )

    def test_durable_state_survives_a_reopen(self) -> None:
        """A byte backend reopened from its directory continues exactly (pending changes and the
        last watermark included); heap is skipped (its state lives in the process)."""
        if self.backend == "heap":
            pytest.skip("heap state does not persist; restore goes through export_keys/import_keys")
        root = Path(tempfile.mkdtemp(prefix="upsertmat-conflict-reopen-"))
        try:
            run_property(
                self._name("reopen"),
                watermarked_streams(),
                lambda stream: self._check_reopen(stream, root),
                weight=0.25,
                scale=self.examples_scale,
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _check_reopen(self, stream: WatermarkedStream, root: Path) -> None:
        behavior = ConflictBehavior.NOTHING
        state_dir = Path(tempfile.mkdtemp(dir=root))
        half = len(stream.lines) // 2
        whole = self.make(stream.keys, behavior)
        try:
            expected = drive(whole, stream.lines)
        finally:
            whole.close()
        first = self.make_on(stream.keys, behavior, self.backend, state_dir)
        try:
            emitted, failed = drive(first, stream.lines[:half], finish=False)
        finally:
            first.close()
        second = self.make_on(stream.keys, behavior, self.backend, state_dir)
        try:
            rest, failed = drive(second, stream.lines[half:])
        finally:
            second.close()
        emitted += [(index + half, change) for index, change in rest]
        assert (emitted, failed) == expected
