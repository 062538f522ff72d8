"""``explain-plan``'s text: the operators, their keys, strategy and state TTLs. O(nodes)."""

from __future__ import annotations

from ..impls.config import TTL
from ..jobs.model import JobSpec
from .model import MATERIALIZER, SINK, SOURCE, Node, Plan


def format_ttl(ttl_ms: int) -> str:
    """``"0 ms (off)"``, ``"5000 ms (5 s)"``, ``"3600000 ms (1 h)"``."""
    if ttl_ms == 0:
        return "0 ms (off)"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ttl_ms % size == 0:
            return f"{ttl_ms} ms ({ttl_ms // size} {unit})"
    return f"{ttl_ms} ms"


def _keys(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]" if names else "none (rows match on the whole row)"


def _describe(node: Node, job: JobSpec) -> list[str]:
    head = f"[{node.id}] {node.type}"
    if node.inputs:
        head += " <- " + ", ".join(f"[{item}]" for item in node.inputs)
    fields = node.fields
    if node.type == SOURCE:
        columns = ", ".join(f"{column.name} {column.ddl_type}" for column in job.source.columns)
        return [
            head,
            f"    {fields['format']} files at {fields['path']}",
            f"    columns: {columns}",
            f"    op column {fields['op-column']}, arrival order {fields['order-column']}",
        ]
    if node.type == MATERIALIZER:
        lines = [
            head,
            f"    keyed by the sink primary key {_keys(fields['primary-key'])}",
            f"    upsert key: {_keys(fields.get('upsert-key', []))}",
            f"    strategy {job.settings.strategy.value} on the {job.settings.backend.value} state backend",
        ]
        if node.state is None:
            lines.append(
                f"    state: not listed; TTL falls back to {TTL} = {format_ttl(job.settings.ttl.ttl_ms)}"
            )
        else:
            for entry in node.state:
                lines.append(f"    state[{entry.index}] {entry.name}: ttl {format_ttl(entry.ttl_ms)}")
        return lines
    if node.type == SINK:
        kind = job.sink.kind
        return [
            head,
            f"    upsert into {kind.name} {fields['url']} table {fields['table']}",
            f"    primary key {_keys(fields['primary-key'])}; {kind.commit_note}",
        ]
    return [head]  # pragma: no cover - parse_plan admits no other node types


def explain(plan: Plan, job: JobSpec) -> str:
    """The plan as text; ``job`` is the plan resolved (:func:`~upsertmat.plan.compiler.job_of_plan`)."""
    lines = [
        f"plan {plan.job!r} (compiled plan format version {plan.version})",
        f"checkpoint: {plan.checkpoint}",
        f"spark: master {job.spark.master}, {job.spark.shuffle_partitions} state partitions, "
        f"files per micro-batch: {job.spark.max_files_per_trigger or 'all'}",
        "" if plan.node(MATERIALIZER) else "materializer: none (the raw changelog goes to the sink)",
        "operators:",
    ]
    lines = [line for line in lines if line]
    for node in plan.nodes:
        lines.extend("  " + line for line in _describe(node, job))
    lines.append("configuration in force:")
    lines.extend(f"  {key}: {value}" for key, value in job.config.items())
    return "\n".join(lines)
