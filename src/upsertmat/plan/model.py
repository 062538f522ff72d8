"""The compiled plan: a job's operators as JSON, with per-operator state TTL.

Shape (format version 1)::

    {"format": "upsertmat-compiled-plan", "version": 1, "job": "users-levels",
     "configuration": {"table.exec.state.ttl": "0 ms", ...},      # the resolved keys
     "checkpoint": "/abs/ck", "spark": {"master": "local[2]", "shuffle-partitions": 2,
                                        "max-files-per-trigger": null},
     "nodes": [
       {"id": 1, "type": "source", "inputs": [], "path": ..., "format": "jsonl",
        "columns": [{"id": "long"}, ...], "op-column": "op", "order-column": "seq"},
       {"id": 2, "type": "sink-materializer", "inputs": [1], "primary-key": ["id"],
        "upsert-key": [], "strategy": "MAP",
        "state": [{"index": 0, "ttl": "0 ms", "name": "sinkMaterializeState"}]},
       {"id": 3, "type": "sink", "inputs": [2], "url": ..., "table": ..., "primary-key": ["id"]}]}

Stateful operators (here: the materializer) list their state entries; a user edits a
``ttl`` and runs ``upsertmat execute-plan``. A stateful node without ``state`` falls back to
``table.exec.state.ttl`` of ``configuration``. This module holds the types only;
:mod:`upsertmat.plan.codec` reads and writes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PLAN_FORMAT = "upsertmat-compiled-plan"
PLAN_VERSION = 1

SOURCE = "source"
MATERIALIZER = "sink-materializer"
SINK = "sink"
NODE_TYPES = (SOURCE, MATERIALIZER, SINK)
MATERIALIZER_STATE = "sinkMaterializeState"
STATE_NAMES: dict[str, tuple[str, ...]] = {MATERIALIZER: (MATERIALIZER_STATE,)}
"""The state entries each stateful node type has, by index."""


class PlanError(ValueError):
    """A plan file that cannot be used; the message names the node and field."""


@dataclass(frozen=True)
class StateEntry:
    """One state of a stateful operator: its index, name and retention (``ttl_ms == 0``: off)."""

    index: int
    name: str
    ttl_ms: int


@dataclass(frozen=True)
class Node:
    """One operator: id, type, input node ids, its state entries (None: not given) and fields."""

    id: int
    type: str
    inputs: tuple[int, ...]
    state: tuple[StateEntry, ...] | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def stateful(self) -> bool:
        """True for operator types that keep state."""
        return self.type in STATE_NAMES


@dataclass(frozen=True)
class Plan:
    """A validated plan: its job name, resolved configuration keys, run options and nodes in order."""

    job: str
    configuration: dict[str, str]
    checkpoint: str
    spark: dict[str, Any]
    nodes: tuple[Node, ...]
    version: int = PLAN_VERSION

    def node(self, type_: str) -> Node | None:
        """The first node of a type, or None."""
        return next((node for node in self.nodes if node.type == type_), None)
