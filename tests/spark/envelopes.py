"""A changelog written as CDC envelopes, as Flink's debezium-json, canal-json and maxwell-json
formats serialize one (``+I``/``+U`` -> create / INSERT / insert, ``-U``/``-D`` -> delete / DELETE /
delete: an update's two halves travel separately), with the extras real tools write: Debezium
schema-wrapped envelopes and tombstones, Canal messages carrying several rows of one type and
values as strings, Maxwell's metadata fields."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

COLUMNS = ("id", "level", "badge")


def debezium_lines(changes: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    lines = []
    for seq, (op, row) in enumerate(changes):
        adds = op in ("+I", "+U")
        payload = {
            "before": None if adds else row,
            "after": row if adds else None,
            "op": "c" if adds else "d",
            "ts_ms": 1_700_000_000_000 + seq // 3,  # not unique: the line order is the order
            "source": {"connector": "mysql", "db": "demo", "table": "users", "pos": 4 + seq},
        }
        if seq % 5 == 0:
            lines.append(
                json.dumps({"schema": {"type": "struct", "name": "users.Envelope"}, "payload": payload})
            )
        else:
            lines.append(json.dumps(payload))
        if seq % 7 == 6:
            lines.append("null")  # a tombstone after a delete, as Kafka keeps it
    return lines


def canal_lines(changes: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    lines: list[str] = []
    group: list[dict[str, Any]] = []
    kind = ""
    for seq, (op, row) in enumerate(changes):
        this = "INSERT" if op in ("+I", "+U") else "DELETE"
        if group and (this != kind or len(group) == 3):
            lines.append(_canal(kind, group, seq))
            group = []
        kind = this
        group.append({name: None if value is None else str(value) for name, value in row.items()})
    if group:
        lines.append(_canal(kind, group, len(changes)))
    return lines


def _canal(kind: str, rows: list[dict[str, Any]], seq: int) -> str:
    return json.dumps(
        {
            "data": rows,
            "database": "demo",
            "table": "users",
            "pkNames": ["id"],
            "isDdl": False,
            "type": kind,
            "es": 1_700_000_000_000 + seq,
            "ts": 1_700_000_000_100 + seq,
            "old": None,
            "id": seq,
        }
    )


def maxwell_lines(changes: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    return [
        json.dumps(
            {
                "database": "demo",
                "table": "users",
                "type": "insert" if op in ("+I", "+U") else "delete",
                "ts": 1_700_000_000 + seq // 10,
                "xid": 100 + seq,
                "commit": True,
                "data": row,
            }
        )
        for seq, (op, row) in enumerate(changes)
    ]


WRITERS = {"debezium-json": debezium_lines, "canal-json": canal_lines, "maxwell-json": maxwell_lines}
