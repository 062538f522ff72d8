"""The contract as data: the job lifecycle table enforced by the registry, the configuration keys of
the request models, and the statuses the OpenAPI schema documents (issue 31, item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from upsertmat.gateway.contract import PipelineStrategy, Properties
from upsertmat.gateway.lifecycle import TRANSITIONS, BadTransition, Event, JobState
from upsertmat.gateway.registry import Registry
from upsertmat.impls.config import KNOWN_KEYS
from upsertmat.spark.config import PIPELINE_STRATEGIES

from .conftest import Served


def test_the_registry_moves_a_job_only_along_the_table(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    try:
        for state in JobState:
            if state is JobState.DELETED:
                continue
            for event in Event:
                job_id = f"j-{state.value.lower()}-{event.value}"
                registry.add_job("s-1", "t", "job", "{}", {}, job_id)
                registry.db.execute("UPDATE jobs SET state = ? WHERE id = ?", (state.value, job_id))
                allowed = TRANSITIONS.get((state, event))
                if allowed is None:
                    with pytest.raises(BadTransition) as refused:
                        registry.transition(job_id, event)
                    assert state.value in str(refused.value)
                    found = registry.job(job_id)
                    assert found is not None and found.state == state.value  # nothing changed
                else:
                    record = registry.transition(job_id, event)
                    assert record.state == allowed.value
                    stored = registry.job(job_id)
                    assert (stored is None) if allowed is JobState.DELETED else (stored == record)
        with pytest.raises(KeyError):
            registry.transition("j-none", Event.STOP)
    finally:
        registry.close()


def test_the_request_keys_are_the_configuration_keys() -> None:
    aliases = {field.alias for field in Properties.model_fields.values()}
    assert aliases <= set(KNOWN_KEYS)
    # the two ADAPTIVE thresholds are left to job files (a rule across two keys), LMDB's
    # durability to the backends that use it (the pipeline's state is Spark's)
    assert set(KNOWN_KEYS) - aliases == {
        "table.exec.sink.upsert-materialize-strategy.adaptive.threshold.high",
        "table.exec.sink.upsert-materialize-strategy.adaptive.threshold.low",
        "upsertmat.state.lmdb.durability",
    }


def test_every_route_documents_its_statuses(served: Served) -> None:
    import httpx

    schema = httpx.get(
        f"{served.url}/v1/openapi.json", headers={"Authorization": "Bearer in-process-token-5c2e"}, timeout=30
    ).json()
    assert schema["openapi"].startswith("3.1")
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            codes = set(operation["responses"])
            assert "401" in codes and "422" not in codes, (method, path)
            if "{" in path or operation.get("requestBody") or operation.get("parameters"):
                assert "400" in codes, (method, path)
            if operation.get("requestBody"):
                assert "413" in codes, (method, path)
            for code in codes - {"200", "201"}:
                content = operation["responses"][code]["content"]
                assert content["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    assert "HTTPValidationError" not in schema["components"]["schemas"]


def test_the_schema_lists_only_the_strategies_the_gateway_accepts(served: Served) -> None:
    """Issue 45, item 5: the schema's strategies included SORTED, which a session or configure
    request answered with 400 (Schemathesis' three failures)."""
    import httpx

    assert [item.value for item in PipelineStrategy] == [item.value for item in PIPELINE_STRATEGIES]
    auth = {"Authorization": "Bearer in-process-token-5c2e"}
    with httpx.Client(base_url=served.url, headers=auth, timeout=60) as http:
        schema = http.get("/v1/openapi.json").json()
        properties = schema["components"]["schemas"]["Properties"]["properties"]
        listed = properties["table.exec.sink.upsert-materialize-strategy.type"]["anyOf"][0]["$ref"]
        assert schema["components"]["schemas"][listed.rsplit("/", 1)[1]]["enum"] == [
            "LEGACY",
            "VALUE",
            "MAP",
            "ADAPTIVE",
        ]
        key = "table.exec.sink.upsert-materialize-strategy.type"
        for strategy in [*PipelineStrategy, "SORTED"]:
            value = strategy if isinstance(strategy, str) else strategy.value
            opened = http.post("/v1/sessions", json={"properties": {key: value}})
            assert opened.status_code == (400 if value == "SORTED" else 201), (value, opened.text)
            session = http.post("/v1/sessions", json={}).json()["session"]
            configured = http.post(f"/v1/sessions/{session}/configure", json={"properties": {key: value}})
            assert configured.status_code == (400 if value == "SORTED" else 200), (value, configured.text)
            for found in (opened, configured):
                if found.status_code != 400:
                    http.delete(f"/v1/sessions/{found.json()['session']}")
            if configured.status_code == 400:
                http.delete(f"/v1/sessions/{session}")


def test_every_refused_transition_says_what_to_do() -> None:
    from upsertmat.gateway.lifecycle import refusal

    for state in JobState:
        for event in Event:
            if state is JobState.DELETED or (state, event) in TRANSITIONS:
                continue
            message = refusal("j-0123456789", state, event)
            assert message.startswith(f"job j-0123456789 is {state.value}: "), message
            assert "from " + state.value not in message  # no list of the table's event names
            if event in (Event.RESTART, Event.DELETE) and state is not JobState.STOPPING:
                assert "stop it first" in message and f"then {event.value} it" in message, message
