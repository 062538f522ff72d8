"""Reading (with validation) and writing compiled plans as JSON.

:func:`parse_plan` checks everything a user can get wrong when editing a plan by hand and
raises :class:`~upsertmat.plan.model.PlanError` naming the node and field: another format, a
newer format version, unknown node types or fields, a node graph other than source ->
[materializer] -> sink, state entries on a stateless node, wrong names or indexes, malformed
durations. Configuration keys and values are checked later, when the plan becomes a job.
O(size of the plan).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..impls.config import parse_duration_ms
from .model import (
    MATERIALIZER,
    NODE_TYPES,
    PLAN_FORMAT,
    PLAN_VERSION,
    SINK,
    SOURCE,
    STATE_NAMES,
    Node,
    Plan,
    PlanError,
    StateEntry,
)

_TOP_KEYS = ("format", "version", "job", "configuration", "checkpoint", "spark", "nodes")
_NODE_COMMON = ("id", "type", "inputs", "state")
_NODE_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # type: (required fields, optional fields)
    SOURCE: (("path", "format", "columns", "op-column", "order-column"), ("on-error", "dead-letter")),
    MATERIALIZER: (("primary-key",), ("upsert-key", "strategy")),
    SINK: (("url", "table", "primary-key"), ()),
}
_SPARK_KEYS = ("master", "shuffle-partitions", "max-files-per-trigger")


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The JSON document of a plan (TTLs as ``"<n> ms"``)."""
    nodes = []
    for node in plan.nodes:
        item: dict[str, Any] = {"id": node.id, "type": node.type, "inputs": list(node.inputs)}
        item.update(node.fields)
        if node.state is not None:
            item["state"] = [
                {"index": entry.index, "ttl": f"{entry.ttl_ms} ms", "name": entry.name}
                for entry in node.state
            ]
        nodes.append(item)
    return {
        "format": PLAN_FORMAT,
        "version": plan.version,
        "job": plan.job,
        "configuration": dict(plan.configuration),
        "checkpoint": plan.checkpoint,
        "spark": dict(plan.spark),
        "nodes": nodes,
    }


def write_plan(plan: Plan, path: Path) -> None:
    """Write the plan as indented JSON (OSError propagates)."""
    path.write_text(json.dumps(plan_to_json(plan), indent=2) + "\n", encoding="utf-8")


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(f"{where} must be an integer, got {value!r}")
    return value


def _state(value: Any, node_id: int, type_: str) -> tuple[StateEntry, ...]:
    where = f"node {node_id} ({type_}): state"
    names = STATE_NAMES.get(type_)
    if names is None:
        raise PlanError(f"{where}: a {type_} node keeps no state")
    if not isinstance(value, list):
        raise PlanError(f"{where} must be a list of {{index, ttl, name}} entries")
    entries = []
    for position, item in enumerate(value):
        at = f"{where}[{position}]"
        if not isinstance(item, Mapping):
            raise PlanError(f"{at} must be an object {{index, ttl, name}}, got {item!r}")
        unknown = sorted(set(item) - {"index", "ttl", "name"})
        if unknown:
            raise PlanError(f"{at}: unknown field {unknown[0]!r} (known: index, ttl, name)")
        missing = [key for key in ("index", "ttl", "name") if key not in item]
        if missing:
            raise PlanError(f"{at}: missing {missing[0]!r}")
        index = _int(item["index"], f"{at}.index")
        if index != position:
            raise PlanError(f"{at}.index must be {position} (entries are listed by index), got {index}")
        if index >= len(names):
            raise PlanError(
                f"{at}: a {type_} node has {len(names)} state entr{'y' if len(names) == 1 else 'ies'}"
            )
        if item["name"] != names[index]:
            raise PlanError(f"{at}.name must be {names[index]!r}, got {item['name']!r}")
        try:
            ttl = parse_duration_ms(item["ttl"])
        except ValueError as error:
            raise PlanError(f"{at}.ttl: {error}") from None
        entries.append(StateEntry(index, names[index], ttl))
    if len(entries) != len(names):
        raise PlanError(
            f"{where} must list {len(names)} entr{'y' if len(names) == 1 else 'ies'}: {list(names)}"
        )
    return tuple(entries)


def _node(value: Any, position: int, seen: list[int]) -> Node:
    if not isinstance(value, Mapping):
        raise PlanError(f"nodes[{position}] must be an object")
    if "id" not in value or "type" not in value:
        raise PlanError(f"nodes[{position}] needs an id and a type")
    node_id = _int(value["id"], f"nodes[{position}].id")
    if node_id in seen:
        raise PlanError(f"node id {node_id} is used twice")
    type_ = value["type"]
    if type_ not in NODE_TYPES:
        raise PlanError(f"node {node_id}: unknown operator type {type_!r}; known: {', '.join(NODE_TYPES)}")
    required, optional = _NODE_FIELDS[type_]
    unknown = sorted(set(value) - set(_NODE_COMMON) - set(required) - set(optional))
    if unknown:
        raise PlanError(f"node {node_id} ({type_}): unknown field {unknown[0]!r}")
    missing = [key for key in required if key not in value]
    if missing:
        raise PlanError(f"node {node_id} ({type_}): missing field {missing[0]!r}")
    inputs = value.get("inputs", [])
    if not isinstance(inputs, list):
        raise PlanError(f"node {node_id} ({type_}): inputs must be a list of node ids")
    inputs_ids = tuple(_int(item, f"node {node_id} inputs") for item in inputs)
    for item in inputs_ids:
        if item not in seen:
            raise PlanError(f"node {node_id} ({type_}): input {item} is not an earlier node")
    state = _state(value["state"], node_id, type_) if "state" in value else None
    fields = {key: value[key] for key in (*required, *optional) if key in value}
    return Node(node_id, type_, inputs_ids, state, fields)


def _check_shape(nodes: list[Node]) -> None:
    types = [node.type for node in nodes]
    if types not in ([SOURCE, SINK], [SOURCE, MATERIALIZER, SINK]):
        raise PlanError(
            f"unsupported operator graph {' -> '.join(types)}: the pipeline runs source -> "
            f"{MATERIALIZER} -> sink (or source -> sink without the materializer)"
        )
    for before, node in itertools.pairwise(nodes):
        if node.inputs != (before.id,):
            raise PlanError(f"node {node.id} ({node.type}) must take node {before.id} as its only input")
    if nodes[0].inputs:
        raise PlanError(f"node {nodes[0].id} (source) cannot have inputs")


def parse_plan(data: Any) -> Plan:
    """A validated :class:`Plan` from a parsed JSON document. PlanError on any problem."""
    if not isinstance(data, Mapping):
        raise PlanError("a plan must be a JSON object")
    if data.get("format") != PLAN_FORMAT:
        raise PlanError(f"not an upsertmat plan: format is {data.get('format')!r}, expected {PLAN_FORMAT!r}")
    version = _int(data.get("version"), "version")
    if version > PLAN_VERSION:
        raise PlanError(
            f"the plan has format version {version}, newer than this upsertmat reads ({PLAN_VERSION}); "
            "upgrade upsertmat or compile the plan again"
        )
    if version < 1:
        raise PlanError(f"bad plan format version {version}")
    unknown = sorted(set(data) - set(_TOP_KEYS))
    if unknown:
        raise PlanError(f"unknown top-level field {unknown[0]!r}; known: {', '.join(_TOP_KEYS)}")
    for key in ("job", "checkpoint"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise PlanError(f"{key} must be a non-empty string")
    configuration = data.get("configuration", {})
    if not isinstance(configuration, Mapping) or not all(isinstance(k, str) for k in configuration):
        raise PlanError("configuration must be an object of configuration keys")
    spark = data.get("spark", {})
    if not isinstance(spark, Mapping):
        raise PlanError("spark must be an object")
    unknown = sorted(set(spark) - set(_SPARK_KEYS))
    if unknown:
        raise PlanError(f"spark: unknown field {unknown[0]!r}; known: {', '.join(_SPARK_KEYS)}")
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise PlanError("nodes must be a non-empty list")
    nodes: list[Node] = []
    for position, raw in enumerate(raw_nodes):
        nodes.append(_node(raw, position, [node.id for node in nodes]))
    _check_shape(nodes)
    return Plan(
        job=data["job"],
        configuration={key: value for key, value in configuration.items()},
        checkpoint=data["checkpoint"],
        spark=dict(spark),
        nodes=tuple(nodes),
        version=version,
    )


def read_plan(path: Path) -> Plan:
    """Read and validate a plan file. PlanError if unreadable, not JSON or invalid."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PlanError(f"cannot read plan {path}: {error.strerror}") from error
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise PlanError(f"plan {path} is not valid JSON: {error}") from error
    return parse_plan(data)
