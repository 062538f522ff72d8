"""Job -> plan (``compile-plan``) and plan -> job (``execute-plan``).

:func:`compile_job` lays the resolved job out as nodes: the source, the materializer (unless
the job writes the raw changelog), the sink. The materializer's one state entry,
``sinkMaterializeState``, gets the job's ``table.exec.state.ttl``.

:func:`job_of_plan` turns a validated plan back into a job. The plan's ``configuration`` is
the job layer; a materializer's ``strategy`` and its state entry's ``ttl`` are layered above
it, so an edited TTL is the one in force; a materializer without ``state`` keeps
``table.exec.state.ttl``. O(nodes).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..impls.config import STRATEGY, TTL
from ..jobs.loader import Layer, job_from_document
from ..jobs.model import INTERNAL_URL, JobSpec
from .model import MATERIALIZER, MATERIALIZER_STATE, SINK, SOURCE, Node, Plan, PlanError, StateEntry


def compile_job(job: JobSpec) -> Plan:
    """The plan of a resolved job (absolute paths, every configuration key resolved)."""
    source = Node(
        id=1,
        type=SOURCE,
        inputs=(),
        fields={
            "path": str(job.source.path.resolve()),
            "format": job.source.format.value,
            "columns": [{column.name: column.type} for column in job.source.columns],
            "op-column": job.source.op_column,
            "order-column": job.source.order_column,
        },
    )
    if job.source.on_error != "fail":
        source.fields["on-error"] = job.source.on_error
    if job.source.dead_letter is not None:
        source.fields["dead-letter"] = str(job.source.dead_letter.resolve())
    nodes = [source]
    if job.materialize:
        nodes.append(
            Node(
                id=2,
                type=MATERIALIZER,
                inputs=(1,),
                state=(StateEntry(0, MATERIALIZER_STATE, job.settings.ttl.ttl_ms),),
                fields={
                    "primary-key": list(job.primary_key),
                    "upsert-key": list(job.upsert_key),
                    "strategy": job.settings.strategy.value,
                },
            )
        )
    # An internal sink gets its database from the client that runs the plan; a local file or
    # table is recorded absolute.
    url = INTERNAL_URL if job.sink.internal else job.sink.kind.resolve(job.sink.url, Path.cwd())
    nodes.append(
        Node(
            id=len(nodes) + 1,
            type=SINK,
            inputs=(nodes[-1].id,),
            fields={"url": url, "table": job.sink.table, "primary-key": list(job.primary_key)},
        )
    )
    spark = {
        "master": job.spark.master,
        "shuffle-partitions": job.spark.shuffle_partitions,
        "max-files-per-trigger": job.spark.max_files_per_trigger,
    }
    return Plan(
        job=job.name,
        configuration=dict(job.config),
        checkpoint=str(job.checkpoint.resolve()),
        spark=spark,
        nodes=tuple(nodes),
    )


def _required(node: Node, type_: str) -> Node:
    if node.type != type_:
        raise PlanError(f"node {node.id}: expected a {type_} node, got {node.type!r}")
    return node


def job_of_plan(
    plan: Plan,
    base: Path,
    where: str,
    cli_layers: Sequence[Layer] = (),
    *,
    output_base: Path | None = None,
    internal_url: str | None = None,
    below_job: Sequence[Layer] = (),
) -> JobSpec:
    """The job a validated plan describes; ``base`` resolves relative paths (the plan's folder)."""
    source = _required(plan.nodes[0], SOURCE)
    sink = _required(plan.nodes[-1], SINK)
    materializer = plan.node(MATERIALIZER)
    layers: list[Layer] = []
    keys: dict[str, Any] = {"primary-key": sink.fields["primary-key"]}
    if materializer is not None:
        if materializer.fields["primary-key"] != sink.fields["primary-key"]:
            raise PlanError(
                f"{where}: node {materializer.id} is keyed by {materializer.fields['primary-key']} but the "
                f"sink's primary key is {sink.fields['primary-key']}"
            )
        keys["upsert-key"] = materializer.fields.get("upsert-key", [])
        if "strategy" in materializer.fields:
            layers.append(
                (f"{where} node {materializer.id} strategy", {STRATEGY: materializer.fields["strategy"]})
            )
        if materializer.state is not None:
            (entry,) = materializer.state
            layers.append((f"{where} node {materializer.id} state[0].ttl", {TTL: entry.ttl_ms}))
    source_document: dict[str, Any] = {
        "path": source.fields["path"],
        "format": source.fields["format"],
        "columns": source.fields["columns"],
        "op-column": source.fields["op-column"],
        "order-column": source.fields["order-column"],
    }
    source_document.update(
        {name: source.fields[name] for name in ("on-error", "dead-letter") if name in source.fields}
    )
    document = {
        "name": plan.job,
        "source": source_document,
        "keys": keys,
        "sink": {"internal": True, "table": sink.fields["table"]}
        if sink.fields["url"] == INTERNAL_URL
        else {"url": sink.fields["url"], "table": sink.fields["table"]},
        "checkpoint": plan.checkpoint,
        "materialize": materializer is not None,
        "spark": plan.spark,
        "config": plan.configuration,
    }
    # The plan's configuration is the job layer; the node's own fields sit above it, the command line on top.
    return job_from_document(
        document,
        base=base,
        where=where,
        cli_layers=[*layers, *cli_layers],
        output_base=output_base,
        internal_url=internal_url,
        below_job=below_job,
    )
