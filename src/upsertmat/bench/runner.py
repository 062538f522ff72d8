"""Run the benchmark grid: every (strategy, backend, upsert key, delay, percentage) cell.

For one cell, each repetition builds a fresh materializer through the registry
(:func:`upsertmat.impls.create`; byte backends get a fresh temporary ``state_dir`` that is
removed afterwards, and commit once per ``Plan.checkpoint_interval`` inputs), feeds the
untimed warm-up prefix and commits it, then times the ``timed`` changes with
:func:`time.perf_counter_ns` around the processing loop and the final ``commit()`` (so every
timed input is durable inside the timed region). Throughput = timed records / elapsed
milliseconds (ops/ms). The process's CPU time over the same loop
(:func:`time.process_time_ns`) is recorded too, as a diagnostic of a busy machine.

Budget: ``max_seconds_per_cell`` bounds a cell's wall time (warm-ups included). The loop
checks the clock once per :data:`CHUNK` records. A repetition that runs out of budget is
abandoned: if it was the cell's first and timing had begun, the cell is ``partial`` and its
throughput is the rate over the records done; if no timing had begun it is ``skipped``.
Further repetitions start only while the cell's elapsed time plus the slowest repetition so
far fits in the budget (at least one is always tried).

Memory (:mod:`.footprint`, never timed): per cell the state's bytes per live row at the end
of the workload. Heap: one extra, untimed pass of the whole workload under tracemalloc after
the repetitions (the rows themselves not counted). RocksDB and LMDB: the state directory's
bytes on disk after the last repetition is closed (LMDB: its pages in use), less those of an
empty state of the same cell (the engine's fixed files and pages). And the process's
peak RSS when the cell ends (the high-water mark of the run so far).
"""

from __future__ import annotations

import gc
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..impls import Backend, Settings, Strategy, create, registry
from ..impls.settings import DEFAULT_CHECKPOINT_INTERVAL
from ..spec import BatchProcessing, Change, Materializer, process_many
from .footprint import directory_bytes, lmdb_pages_under, peak_rss_bytes, traced_state_bytes
from .manykeys import NAME, ManyKeysSpec, generate_many_keys
from .stats import Summary, summarize
from .workload import HistoryShape, Workload, WorkloadSpec, generate, keys_for

MANY_KEYS = NAME

CHUNK = 64
"""Records processed between two clock checks of the budget (one ``process_many`` call)."""

FLIP544 = "flip544"
WORKLOADS = (FLIP544, MANY_KEYS)
"""The workloads: FLIP-544's single key (:mod:`.workload`) and many keys (:mod:`.manykeys`)."""

OK = "ok"
PARTIAL = "partial"
SKIPPED = "skipped"
ERROR = "error"


@dataclass(frozen=True)
class Cell:
    """One point of the grid."""

    strategy: Strategy
    backend: Backend
    upsert_key: bool
    retract_delay: int
    retract_percentage: int
    workload: str = FLIP544
    """:data:`FLIP544` or :data:`MANY_KEYS` (whose cells have delay 0 and percentage 100)."""

    @property
    def implementation(self) -> str:
        """``STRATEGY/backend``."""
        return f"{self.strategy.value}/{self.backend.value}"

    def label(self) -> str:
        """A short human label, e.g. ``MAP/rocksdb ukey=on pct=75 delay=1000``."""
        ukey = "on" if self.upsert_key else "off"
        if self.workload == MANY_KEYS:
            return f"{self.implementation} ukey={ukey} {MANY_KEYS}"
        return f"{self.implementation} ukey={ukey} pct={self.retract_percentage} delay={self.retract_delay}"


WALL = "wall"
CPU = "cpu"
CLOCKS = (WALL, CPU)


@dataclass
class CellResult:
    """What one cell measured.

    Two clocks time the same loop: ``wall`` (:func:`time.perf_counter_ns`, what the benchmark
    reports by default) and ``cpu`` (:func:`time.process_time_ns`: the process's CPU time, all
    its threads). On a busy machine wall time grows while CPU time does not, so their ratio
    shows contention. ``clock`` selects which one :attr:`throughputs`, :attr:`summary`,
    :attr:`estimate` (and so the table, the plots and the goals) use.

    ``status``: ``ok`` (at least one full repetition; one ops/ms value per completed
    repetition and clock), ``partial`` (the first repetition ran out of budget while timed:
    the partial rates are over ``partial_records``), ``skipped`` (out of budget before timing
    began), ``error`` (``note`` says what failed).
    """

    cell: Cell
    records: int
    history: HistoryShape
    repetitions_requested: int
    clock: str = WALL
    status: str = OK
    wall_throughputs: list[float] = field(default_factory=list)
    cpu_throughputs: list[float] = field(default_factory=list)
    partial_wall: float | None = None
    partial_cpu: float | None = None
    partial_records: int = 0
    elapsed_s: float = 0.0
    note: str = ""
    state_bytes_per_row: float | None = None
    """State bytes per live row at the end of the workload (module docstring), or None."""
    state_bytes_method: str = "-"
    """``traced`` (heap, tracemalloc), ``disk`` (rocksdb, lmdb) or ``-`` (not measured)."""
    lmdb_pages: int | None = None
    """LMDB pages in use at the end (lmdb cells)."""
    live_rows: int = 0
    """Rows held at the end of the workload (what ``state_bytes_per_row`` divides by)."""
    peak_rss_bytes: int = 0
    """The process's peak RSS when the cell ended (bytes)."""

    @property
    def throughputs(self) -> list[float]:
        """Per-repetition ops/ms on the selected clock."""
        return self.cpu_throughputs if self.clock == CPU else self.wall_throughputs

    @property
    def partial_throughput(self) -> float | None:
        """The partial rate on the selected clock (``partial`` cells only)."""
        return self.partial_cpu if self.clock == CPU else self.partial_wall

    @property
    def summary(self) -> Summary | None:
        """Median and spread of the completed repetitions, or None if there are none."""
        return summarize(self.throughputs) if self.throughputs else None

    def median_on(self, clock: str) -> float | None:
        """Median ops/ms of the completed repetitions on ``clock``, or None."""
        sample = self.cpu_throughputs if clock == CPU else self.wall_throughputs
        return summarize(sample).median if sample else None

    @property
    def estimate(self) -> float | None:
        """The median of completed repetitions, else the partial rate, else None."""
        summary = self.summary
        if summary is not None:
            return summary.median
        return self.partial_throughput


class ProgressSink(Protocol):
    """Receives progress events (see :class:`upsertmat.bench.progress.Progress`)."""

    def cell_started(self, index: int, total: int, cell: Cell) -> None: ...

    def repetition_started(self, repetition: int, repetitions: int) -> None: ...

    def cell_finished(self, result: CellResult) -> None: ...


@dataclass(frozen=True)
class Plan:
    """The whole grid: axes, workload parameters, repetitions and budget."""

    pairs: Sequence[tuple[Strategy, Backend]]
    upsert_keys: Sequence[bool]
    retract_delays: Sequence[int]
    retract_percentages: Sequence[int]
    records: int = 10_000
    payload_size: int = 250
    seed: int = 0
    warmup: bool = True
    repetitions: int = 5
    max_seconds_per_cell: float = 30.0
    tmp_root: Path | None = None
    clock: str = WALL
    workloads: Sequence[str] = (FLIP544,)
    async_state: bool = False
    many_keys: ManyKeysSpec | None = None
    """The many-keys workload's parameters (``None``: :class:`ManyKeysSpec`'s defaults with
    this plan's payload size and seed)."""
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL
    """Inputs per durable commit on rocksdb/lmdb (``execution.checkpointing.interval``; replay's
    default). 1 measures a commit per input, the library default."""

    def cells(self) -> list[Cell]:
        """Every cell, grouped by backend and strategy, then upsert key, percentage, delay;
        the many-keys cells of a pair follow its FLIP-544 cells."""
        cells = []
        for strategy, backend in sorted(
            self.pairs, key=lambda pair: (list(Backend).index(pair[1]), list(Strategy).index(pair[0]))
        ):
            if FLIP544 in self.workloads:
                cells += [
                    Cell(strategy, backend, upsert_key, delay, percentage)
                    for upsert_key in self.upsert_keys
                    for percentage in self.retract_percentages
                    for delay in self.retract_delays
                ]
            if MANY_KEYS in self.workloads:
                cells += [Cell(strategy, backend, ukey, 0, 100, MANY_KEYS) for ukey in self.upsert_keys]
        return cells

    def many_keys_spec(self) -> ManyKeysSpec:
        """The many-keys workload of this plan."""
        if self.many_keys is not None:
            return self.many_keys
        return ManyKeysSpec(payload_size=self.payload_size, seed=self.seed)

    def workload_spec(self, cell: Cell) -> WorkloadSpec:
        """The workload of ``cell`` (independent of strategy, backend and upsert key)."""
        return WorkloadSpec(
            records=self.records,
            retract_delay=cell.retract_delay,
            retract_percentage=cell.retract_percentage,
            payload_size=self.payload_size,
            seed=self.seed,
            warmup=self.warmup,
        )


class _OutOfBudget(Exception):
    """A repetition passed the cell's deadline; ``done`` timed records were processed."""

    def __init__(self, timed: bool, done: int = 0, elapsed_ns: int = 0, cpu_ns: int = 0) -> None:
        super().__init__("out of budget")
        self.timed = timed
        self.done = done
        self.elapsed_ns = elapsed_ns
        self.cpu_ns = cpu_ns


def _chunks(changes: list[Change]) -> list[list[Change]]:
    return [changes[start : start + CHUNK] for start in range(0, len(changes), CHUNK)]


def _feed(feed: Callable[[list[Change]], object], chunks: Iterable[list[Change]], deadline_ns: int) -> int:
    """Feed the chunks in order until done or past ``deadline_ns``; records processed."""
    done = 0
    clock = time.perf_counter_ns
    for chunk in chunks:
        feed(chunk)
        done += len(chunk)
        if clock() > deadline_ns:
            break
    return done


def run_repetition(
    cell: Cell,
    prefix: list[list[Change]],
    timed: list[list[Change]],
    deadline_ns: int,
    tmp_root: Path | None = None,
    async_state: bool = False,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
    footprint: list[int] | None = None,
) -> tuple[int, int, int]:
    """One fresh materializer through the workload: (timed records, wall ns, process CPU ns).

    The byte backends commit once per ``checkpoint_interval`` inputs; the prefix is committed
    before the timing starts, the timed inputs by a ``commit()`` inside the timed region.
    ``footprint`` (byte backends): filled with ``[live rows, bytes on disk, LMDB pages]`` once
    the materializer is closed (untimed).

    Raises :class:`_OutOfBudget` past ``deadline_ns`` and RuntimeError if the implementation
    missed a retraction (its output would be wrong, so its speed is meaningless).
    """
    prefix_len = sum(len(chunk) for chunk in prefix)
    timed_len = sum(len(chunk) for chunk in timed)
    with tempfile.TemporaryDirectory(prefix="upsertmat-bench-", dir=tmp_root) as tmp:
        state_dir = None if cell.backend is Backend.HEAP else Path(tmp)
        settings = Settings(
            strategy=cell.strategy,
            backend=cell.backend,
            state_dir=state_dir,
            async_state=async_state,
            checkpoint_interval=checkpoint_interval,
        )
        materializer = create(keys_for(cell.upsert_key), settings)
        commit = _commit_of(materializer)
        feed = _feed_of(materializer)

        try:
            if _feed(feed, prefix, deadline_ns) < prefix_len:
                raise _OutOfBudget(timed=False)
            commit()
            gc.collect()
            cpu_start = time.process_time_ns()
            start = time.perf_counter_ns()
            done = _feed(feed, timed, deadline_ns)
            commit()
            elapsed = time.perf_counter_ns() - start
            cpu = time.process_time_ns() - cpu_start
            if done < timed_len:
                raise _OutOfBudget(timed=True, done=done, elapsed_ns=elapsed, cpu_ns=cpu)
            misses = materializer.retract_misses
            if footprint is not None:
                footprint[:] = [_live_rows(materializer)]
        finally:
            materializer.close()
        if footprint and state_dir is not None:
            pages = lmdb_pages_under(state_dir) if cell.backend is Backend.LMDB else None
            footprint += [directory_bytes(state_dir), -1 if pages is None else pages]
    if misses:
        raise RuntimeError(f"{misses} retractions matched no row: the implementation is wrong here")
    return done, elapsed, cpu


def _live_rows(materializer: object) -> int:
    """The rows ``materializer`` holds (its ``stats()``: a full scan, untimed), 0 if unknown."""
    stats: Callable[[], dict[str, int]] | None = getattr(materializer, "stats", None)
    return 0 if stats is None else stats().get("elements", 0)


def heap_footprint(cell: Cell, changes: list[Change], async_state: bool = False) -> tuple[int, int]:
    """``(bytes, live rows)`` of a heap cell's state after ``changes`` (tracemalloc: the
    bytes allocated and still held, the rows themselves not counted). Untimed."""
    settings = Settings(strategy=cell.strategy, backend=cell.backend, async_state=async_state)
    keys = keys_for(cell.upsert_key)
    held, materializer = traced_state_bytes(lambda: registry.create(keys, settings), changes)
    try:
        return held, _live_rows(materializer)
    finally:
        materializer.close()


def _feed_of(materializer: Materializer) -> Callable[[list[Change]], object]:
    """The batch entry point: the materializer's own ``process_many`` where it has one (found
    once, not per chunk: ``upsertmat.spec.process_many`` asks a runtime-checkable protocol on
    every call, which costs about a microsecond), else ``process`` in a loop."""
    if isinstance(materializer, BatchProcessing):
        batch: Callable[[list[Change]], object] = materializer.process_many
        return batch

    def feed(chunk: list[Change]) -> object:
        return process_many(materializer, chunk)

    return feed


def _commit_of(materializer: object) -> Callable[[], object]:
    """The materializer's durability point (``commit()``), or a no-op for one without."""
    commit: Callable[[], object] | None = getattr(materializer, "commit", None)
    return commit if commit is not None else _nothing


def _nothing() -> None:
    return None


def ops_per_ms(records: int, elapsed_ns: int) -> float:
    """Throughput in records per millisecond."""
    return records * 1_000_000 / max(elapsed_ns, 1)


def run_cell(plan: Plan, cell: Cell, workload: Workload, progress: ProgressSink | None = None) -> CellResult:
    """Measure ``cell``: up to ``plan.repetitions`` repetitions within the cell's budget."""
    result = CellResult(
        cell=cell,
        records=len(workload.timed),
        history=workload.history,
        clock=plan.clock,
        repetitions_requested=plan.repetitions,
    )
    prefix, timed = _chunks(workload.prefix), _chunks(workload.timed)
    cell_start = time.perf_counter_ns()
    deadline = cell_start + int(plan.max_seconds_per_cell * 1e9)
    slowest = 0
    footprint: list[int] = []
    for repetition in range(plan.repetitions):
        started = time.perf_counter_ns()
        if repetition and started + slowest > deadline:
            result.note = f"{repetition}/{plan.repetitions} repetitions fit in the budget"
            break
        if progress is not None:
            progress.repetition_started(repetition + 1, plan.repetitions)
        try:
            records, elapsed, cpu = run_repetition(
                cell,
                prefix,
                timed,
                deadline,
                plan.tmp_root,
                plan.async_state,
                plan.checkpoint_interval,
                None if cell.backend is Backend.HEAP else footprint,
            )
        except _OutOfBudget as stop:
            if repetition:
                result.note = f"{repetition}/{plan.repetitions} repetitions fit in the budget"
            elif stop.timed and stop.done:
                result.status = PARTIAL
                result.partial_records = stop.done
                result.partial_wall = ops_per_ms(stop.done, stop.elapsed_ns)
                result.partial_cpu = ops_per_ms(stop.done, stop.cpu_ns)
                result.note = (
                    f"budget of {plan.max_seconds_per_cell:g} s ran out after "
                    f"{stop.done}/{len(workload.timed)} timed records; throughput is the rate over those"
                )
            else:
                result.status = SKIPPED
                result.note = f"budget of {plan.max_seconds_per_cell:g} s ran out during the warm-up prefix"
            break
        except Exception as error:  # a broken or unavailable implementation: report, go on
            result.status = ERROR
            result.note = f"{type(error).__name__}: {error}"
            break
        result.wall_throughputs.append(ops_per_ms(records, elapsed))
        result.cpu_throughputs.append(ops_per_ms(records, cpu))
        slowest = max(slowest, time.perf_counter_ns() - started)
    result.elapsed_s = (time.perf_counter_ns() - cell_start) / 1e9
    if result.status == OK:
        _measure_footprint(plan, cell, workload, footprint, result)
    result.peak_rss_bytes = peak_rss_bytes()
    return result


_EMPTY_DISK: dict[tuple[Backend, Strategy, bool], int] = {}


def _empty_disk_bytes(cell: Cell, plan: Plan) -> int:
    """The bytes on disk of the cell's state holding nothing (the engine's fixed files and
    pages), measured once per run and subtracted, so bytes per live row count the rows."""
    key = (cell.backend, cell.strategy, cell.upsert_key)
    if key not in _EMPTY_DISK:
        with tempfile.TemporaryDirectory(prefix="upsertmat-bench-", dir=plan.tmp_root) as tmp:
            settings = Settings(
                strategy=cell.strategy,
                backend=cell.backend,
                state_dir=Path(tmp),
                checkpoint_interval=plan.checkpoint_interval,
            )
            materializer = registry.create(keys_for(cell.upsert_key), settings)
            _commit_of(materializer)()
            materializer.close()
            _EMPTY_DISK[key] = directory_bytes(Path(tmp))
    return _EMPTY_DISK[key]


def _measure_footprint(
    plan: Plan, cell: Cell, workload: Workload, footprint: list[int], result: CellResult
) -> None:
    """Fill ``result``'s state bytes per live row (module docstring); a failure only leaves
    them unmeasured (the cell's throughput stands)."""
    try:
        if cell.backend is Backend.HEAP:
            held, live = heap_footprint(cell, [*workload.prefix, *workload.timed], plan.async_state)
            method = "traced"
        elif len(footprint) == 3:
            live, held, pages = footprint
            held = max(0, held - _empty_disk_bytes(cell, plan))
            method = "disk"
            result.lmdb_pages = None if pages < 0 else pages
        else:
            return
    except Exception as error:  # report, go on: memory is a diagnostic here
        result.note = (result.note + "; " if result.note else "") + f"footprint not measured: {error}"
        return
    result.live_rows = live
    if live > 0:
        result.state_bytes_per_row = held / live
        result.state_bytes_method = method


def run_plan(plan: Plan, progress: ProgressSink | None = None) -> list[CellResult]:
    """Every cell of ``plan`` in order; workloads are generated once per (delay, percentage)."""
    workloads: dict[WorkloadSpec | ManyKeysSpec, Workload] = {}
    cells = plan.cells()
    results: list[CellResult] = []
    for index, cell in enumerate(cells):
        spec = plan.many_keys_spec() if cell.workload == MANY_KEYS else plan.workload_spec(cell)
        if spec not in workloads:
            if isinstance(spec, ManyKeysSpec):
                workloads[spec] = generate_many_keys(spec)
            else:
                workloads[spec] = generate(spec)
        if progress is not None:
            progress.cell_started(index + 1, len(cells), cell)
        result = run_cell(plan, cell, workloads[spec], progress)
        if progress is not None:
            progress.cell_finished(result)
        results.append(result)
    return results
