"""What a ``bench`` run measures, from the values of its options: the grid's
:class:`~upsertmat.bench.runner.Plan` (over the implementations the registry can build), the
pipeline's and the gateway's :class:`~upsertmat.bench.pipeline.PipelineBench`, the scale
sweep's :class:`~upsertmat.bench.scale.ScaleBench` and the miss benchmark's
:class:`~upsertmat.bench.misses.MissSpec`.

``None`` for an option means "not given": the preset (:mod:`.presets`) or the benchmark's own
default applies. The command (:mod:`upsertmat.commands.bench`) passes its options here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ..errors import CliError, ExitCode
from ..impls import Backend, Strategy, available
from ..jobs.model import SourceFormat
from .manykeys import ManyKeysSpec
from .misses import MissSpec
from .pipeline import DEFAULT_KEY_BUCKETS, PipelineBench
from .presets import DEFAULT_BACKENDS, FULL, QUICK
from .runner import MANY_KEYS, Plan
from .scale import ScaleBench


def registered_pairs(
    strategies: Sequence[Strategy] | None, backends: Sequence[Backend] | None
) -> tuple[list[tuple[Strategy, Backend]], list[str]]:
    """The (strategy, backend) pairs asked for that are registered, and those that are not
    (``STRATEGY/backend``). Not given: every registered strategy; the default backends that
    have a registered implementation."""
    registered = set(available())
    backends = backends or [b for b in DEFAULT_BACKENDS if any(p[1] is b for p in registered)]
    strategies = strategies or [s for s in Strategy if any(p[0] is s for p in registered)]
    pairs = [(s, b) for b in backends for s in strategies if (s, b) in registered]
    unavailable = [f"{s.value}/{b.value}" for b in backends for s in strategies if (s, b) not in registered]
    return pairs, unavailable


def grid_plan(
    *,
    quick: bool,
    strategies: Sequence[Strategy] | None,
    backends: Sequence[Backend] | None,
    upsert_keys: Sequence[bool] | None,
    retract_delays: Sequence[int] | None,
    retract_percentages: Sequence[int] | None,
    workloads: Sequence[str] | None,
    records: int | None,
    repetitions: int | None,
    max_seconds_per_cell: float | None,
    changes: int | None,
    keys: int | None,
    payload_size: int,
    seed: int,
    warmup: bool,
    tmp_root: Path | None,
    clock: str,
    async_state: bool,
    checkpoint_interval: int,
) -> tuple[Plan, list[str]]:
    """The grid's plan, and the requested implementations nobody registered. CliError (usage)
    if nothing asked for is registered, or the many-keys workload has too few changes."""
    preset = QUICK if quick else FULL
    pairs, unavailable = registered_pairs(strategies, backends)
    if not pairs:
        raise CliError(
            f"nothing to benchmark: none of {', '.join(unavailable)} is registered", ExitCode.USAGE
        )
    plan = Plan(
        pairs=pairs,
        upsert_keys=list(upsert_keys or [True, False]),
        retract_delays=sorted(retract_delays or preset.retract_delays),
        retract_percentages=sorted(retract_percentages or preset.retract_percentages, reverse=True),
        records=records or preset.records,
        payload_size=payload_size,
        seed=seed,
        warmup=warmup,
        repetitions=repetitions or preset.repetitions,
        max_seconds_per_cell=max_seconds_per_cell or preset.max_seconds_per_cell,
        tmp_root=tmp_root,
        clock=clock,
        workloads=workloads or preset.workloads,
        async_state=async_state,
        checkpoint_interval=checkpoint_interval,
    )
    changes = changes or preset.many_keys_changes
    keys = keys or preset.many_keys_keys
    if MANY_KEYS in plan.workloads:
        if changes < keys + 2:
            raise CliError(
                f"the many-keys workload needs --changes >= --keys + 2, got {changes} and {keys}",
                ExitCode.USAGE,
            )
        many = ManyKeysSpec(changes=changes, keys=keys, payload_size=payload_size, seed=seed)
        plan = replace(plan, many_keys=many)
    return plan, unavailable


def key_buckets_of(option: int | None) -> int | None:
    """``--key-buckets``: not given -> the default (256); 0 -> None (one group per sink key)."""
    return DEFAULT_KEY_BUCKETS if option is None else (option or None)


def pipeline_bench(
    *,
    strategies: Sequence[Strategy] | None,
    changes: int | None,
    keys: int | None,
    files: int,
    seed: int,
    source_format: str,
    key_buckets: int | None,
    shuffle_partitions: int | None,
    sink: str,
    state_layout: str,
    state_inline_bytes: int,
) -> PipelineBench:
    """The :class:`~upsertmat.bench.pipeline.PipelineBench` of ``--pipeline``/``--gateway``
    (the first strategy asked for, VALUE if none)."""
    return PipelineBench(
        changes=changes or PipelineBench.changes,
        keys=keys or PipelineBench.keys,
        files=files,
        strategy=strategies[0] if strategies else Strategy.VALUE,
        seed=seed,
        source_format=SourceFormat(source_format),
        key_buckets=key_buckets_of(key_buckets),
        shuffle_partitions=shuffle_partitions or PipelineBench.shuffle_partitions,
        sink=sink,
        state_layout=state_layout,
        state_inline_bytes=state_inline_bytes,
    )


def scale_bench(
    *,
    sizes: tuple[int, ...],
    batch_changes: int,
    batches: int,
    sinks: tuple[str, ...],
    postgres_url: str | None,
    state_layout: str,
    state_inline_bytes: int,
    key_buckets: int | None,
    shuffle_partitions: int | None,
    upsert_keys: Sequence[bool] | None = None,
) -> ScaleBench:
    """The :class:`~upsertmat.bench.scale.ScaleBench` of ``--pipeline --table-sizes``: every
    sink kind asked for, and PostgreSQL at ``postgres_url`` when given (last, unless ``sinks``
    names it: ``("postgresql",)`` is a sweep of PostgreSQL alone); the matching modes of
    ``--upsert-key`` (default: whole rows, then with the upsert key)."""
    return ScaleBench(
        sizes=sizes,
        batch_changes=batch_changes,
        batches=batches,
        sinks=sinks + (("postgresql",) if postgres_url and "postgresql" not in sinks else ()),
        state_layout=state_layout,
        state_inline_bytes=state_inline_bytes,
        server_urls=(("postgresql", postgres_url),) if postgres_url else (),
        key_buckets=key_buckets_of(key_buckets),
        shuffle_partitions=shuffle_partitions or 2,
        keyed=tuple(upsert_keys) if upsert_keys else ScaleBench.keyed,
    )


GATEWAY_CHANGES = 200_000
GATEWAY_KEYS = 20_000
"""``--gateway``'s workload when ``--changes`` is not given (a job a gateway runs in seconds)."""


def gateway_bench(bench: PipelineBench, *, changes_given: bool) -> PipelineBench:
    """The job of ``--gateway``: ``bench`` (:func:`pipeline_bench`), or, without ``--changes``,
    :data:`GATEWAY_CHANGES` changes over :data:`GATEWAY_KEYS` keys."""
    return bench if changes_given else replace(bench, changes=GATEWAY_CHANGES, keys=GATEWAY_KEYS)


def miss_spec(*, records: int | None, keys: int | None, miss_percentage: int, seed: int) -> MissSpec:
    """The workload of ``--misses`` (20,000 records over 1,000 keys unless given); CliError
    (usage) for a percentage above 100."""
    if miss_percentage > 100:
        raise CliError(f"--miss-percentage must be within 0..100, got {miss_percentage}", ExitCode.USAGE)
    return MissSpec(
        records=records or MissSpec.records,
        keys=keys or MissSpec.keys,
        miss_percentage=miss_percentage,
        seed=seed,
    )
