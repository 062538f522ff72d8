"""Compiled plans: compile, codec round trip, TTL editing and fallback, validation, explain (no Spark)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from upsertmat.cli import main
from upsertmat.impls.settings import Strategy
from upsertmat.jobs.loader import load_job
from upsertmat.plan.codec import parse_plan, plan_to_json, read_plan
from upsertmat.plan.compiler import compile_job, job_of_plan
from upsertmat.plan.explain import explain, format_ttl
from upsertmat.plan.model import MATERIALIZER, MATERIALIZER_STATE, PLAN_VERSION, PlanError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "users-levels.yaml"


@pytest.fixture
def document() -> dict[str, Any]:
    return plan_to_json(compile_job(load_job(EXAMPLE)))


def materializer(document: dict[str, Any]) -> dict[str, Any]:
    node: dict[str, Any] = next(node for node in document["nodes"] if node["type"] == MATERIALIZER)
    return node


def test_compiled_plan_lists_operators_and_state(document: dict[str, Any]) -> None:
    assert document["format"] == "upsertmat-compiled-plan" and document["version"] == PLAN_VERSION
    assert [node["type"] for node in document["nodes"]] == ["source", MATERIALIZER, "sink"]
    assert [node["inputs"] for node in document["nodes"]] == [[], [1], [2]]
    node = materializer(document)
    assert node["state"] == [{"index": 0, "ttl": "0 ms", "name": MATERIALIZER_STATE}]
    assert node["primary-key"] == ["id"] and node["upsert-key"] == [] and node["strategy"] == "VALUE"
    assert document["configuration"]["table.exec.state.ttl"] == "0 ms"
    assert document["nodes"][2]["url"] == str(
        Path.cwd() / "users-levels.db"
    )  # outputs: the working directory
    json.dumps(document)  # JSON-ready


def test_codec_round_trip(document: dict[str, Any]) -> None:
    plan = parse_plan(document)
    assert plan_to_json(plan) == document
    assert parse_plan(json.loads(json.dumps(document))) == plan


def test_edited_ttl_and_strategy_are_in_force(document: dict[str, Any], tmp_path: Path) -> None:
    materializer(document)["state"][0]["ttl"] = "90 s"
    materializer(document)["strategy"] = "map"
    job = job_of_plan(parse_plan(document), tmp_path, "plan")
    assert job.settings.ttl.ttl_ms == 90_000
    assert job.settings.strategy is Strategy.MAP
    assert job.config["table.exec.state.ttl"] == "90000 ms"
    # the plan's configuration still says 0 ms: the operator's entry wins
    assert document["configuration"]["table.exec.state.ttl"] == "0 ms"


def test_without_state_the_ttl_falls_back_to_the_configuration(
    document: dict[str, Any], tmp_path: Path
) -> None:
    del materializer(document)["state"]
    document["configuration"]["table.exec.state.ttl"] = "2 h"
    plan = parse_plan(document)
    job = job_of_plan(plan, tmp_path, "plan")
    assert job.settings.ttl.ttl_ms == 7_200_000
    assert "state: not listed; TTL falls back to table.exec.state.ttl = 7200000 ms (2 h)" in explain(
        plan, job
    )


def test_without_materializer(tmp_path: Path) -> None:
    job = load_job(EXAMPLE)
    document = plan_to_json(compile_job(replace(job, materialize=False)))
    assert [node["type"] for node in document["nodes"]] == ["source", "sink"]
    plan = parse_plan(document)
    resolved = job_of_plan(plan, tmp_path, "plan")
    assert resolved.materialize is False
    assert "materializer: none" in explain(plan, resolved)


def edit(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    target = changed
    for step in path[:-1]:
        target = target[step]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return changed


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("nodes", 1, "type"), "stream-exec-join", "node 2: unknown operator type 'stream-exec-join'"),
        (
            ("nodes", 1, "state", 0, "ttl"),
            "5 parsecs",
            r"node 2 \(sink-materializer\): state\[0\].ttl: not a dur",
        ),
        (("nodes", 1, "state", 0, "ttl"), -5, "cannot be negative"),
        (("nodes", 1, "state", 0, "name"), "joinState", "name must be 'sinkMaterializeState'"),
        (("nodes", 1, "state", 0, "index"), 1, r"state\[0\].index must be 0"),
        (("nodes", 1, "state", 0, "extra"), 1, "unknown field 'extra'"),
        (("nodes", 1, "state"), [], "must list 1 entry"),
        (("nodes", 0, "state"), [], r"node 1 \(source\): state: a source node keeps no state"),
        (("nodes", 1, "colour"), "red", "unknown field 'colour'"),
        (("nodes", 2, "table"), KeyError, "missing field 'table'"),
        (("nodes", 2, "inputs"), [7], "input 7 is not an earlier node"),
        (("nodes", 2, "inputs"), [1], "must take node 2 as its only input"),
        (("nodes", 1, "id"), 1, "node id 1 is used twice"),
        (("version",), PLAN_VERSION + 1, "newer than this upsertmat reads"),
        (("version",), "1", "version must be an integer"),
        (("format",), "flink", "not an upsertmat plan"),
        (("nodes",), [], "nodes must be a non-empty list"),
        (("extra",), 1, "unknown top-level field 'extra'"),
        (("spark", "cores"), 4, "spark: unknown field 'cores'"),
    ],
)
def test_validation_errors(document: dict[str, Any], path: tuple[Any, ...], value: Any, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        parse_plan(edit(document, path, value))


def test_graph_shape_is_checked(document: dict[str, Any]) -> None:
    reordered = copy.deepcopy(document)
    reordered["nodes"] = [reordered["nodes"][0], reordered["nodes"][2]]
    reordered["nodes"][1]["inputs"] = [1]
    parse_plan(reordered)  # source -> sink is valid
    reordered["nodes"].append(copy.deepcopy(document["nodes"][1]) | {"id": 9, "inputs": [3]})
    with pytest.raises(PlanError, match="unsupported operator graph source -> sink -> sink-materializer"):
        parse_plan(reordered)


def test_configuration_errors_surface_when_resolving(document: dict[str, Any], tmp_path: Path) -> None:
    document["configuration"]["table.exec.state.tll"] = "1 s"
    with pytest.raises(ValueError, match=r"unknown configuration key 'table\.exec\.state\.tll'"):
        job_of_plan(parse_plan(document), tmp_path, "plan")
    del document["configuration"]["table.exec.state.tll"]
    materializer(document)["strategy"] = "FASTEST"
    with pytest.raises(ValueError, match=r"bad value 'FASTEST'.*node 2 strategy"):
        job_of_plan(parse_plan(document), tmp_path, "plan")


def test_format_ttl() -> None:
    assert [format_ttl(ms) for ms in (0, 1500, 5000, 120_000, 3_600_000, 86_400_000)] == [
        "0 ms (off)", "1500 ms", "5000 ms (5 s)", "120000 ms (2 min)", "3600000 ms (1 h)",
        "86400000 ms (1 d)",
    ]  # fmt: skip


def test_cli_compile_edit_explain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan_file = tmp_path / "plan.json"
    assert main(["compile-plan", str(EXAMPLE), "-o", str(plan_file), "--strategy", "MAP"]) == 0
    document = json.loads(plan_file.read_text())
    assert materializer(document)["strategy"] == "MAP"
    materializer(document)["state"][0]["ttl"] = "1 h"
    plan_file.write_text(json.dumps(document))
    capsys.readouterr()
    assert main(["explain-plan", str(plan_file)]) == 0
    out = capsys.readouterr().out
    assert "[2] sink-materializer <- [1]" in out
    assert "keyed by the sink primary key [id]" in out
    assert "strategy MAP on the spark state backend" in out
    assert "state[0] sinkMaterializeState: ttl 3600000 ms (1 h)" in out
    assert "table.exec.state.ttl: 3600000 ms" in out
    assert read_plan(plan_file).node(MATERIALIZER) is not None


def test_cli_rejects_bad_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text("{not json")
    assert main(["explain-plan", str(plan_file)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err
    document = plan_to_json(compile_job(load_job(EXAMPLE)))
    document["version"] = 99
    plan_file.write_text(json.dumps(document))
    assert main(["explain-plan", str(plan_file)]) == 2
    assert "format version 99, newer than this upsertmat reads (1)" in capsys.readouterr().err
    assert main(["execute-plan", str(plan_file)]) == 2
    assert main(["explain-plan", str(tmp_path / "missing.json")]) == 2
    assert "cannot read plan" in capsys.readouterr().err
