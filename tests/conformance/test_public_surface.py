"""``upsertmat.conformance`` exports exactly what a third party subclasses or calls (docs/conformance.md,
"The public surface"), each name importable, and importing the package (as pytest does for the
plugin in every session) loads no Hypothesis."""

from __future__ import annotations

import subprocess
import sys
import types

import upsertmat.conformance

PUBLIC = [
    # the abstract test classes
    "MaterializerTests",
    "StateBackendTests",
    "PersistentBackendTests",
    "machine_for",
    "ConflictMaterializerTests",
    # the failure every check raises, and the check functions
    "Mismatch",
    "Maker",
    "check_scenario",
    "check_ttl_scenario",
    "check_stream",
    "check_timed_stream",
    # the catalogues
    "Scenario",
    "SCENARIOS",
    "TtlScenario",
    "TTL_SCENARIOS",
    "PINNED",
    # the Hypothesis generators and what they produce
    "GeneratedStream",
    "TimedStream",
    "Advance",
    "Step",
    "KEYS_WITH_UPSERT_KEY",
    "KEYS_WITHOUT_UPSERT_KEY",
    "valid_streams",
    "bare_update_streams",
    "long_histories",
    "tolerated_streams",
    "any_streams",
    "timed_streams",
    # the process protocol
    "Program",
    "ProtocolError",
    "Output",
    "encode_step",
    "decode_output",
    # the pytest plugin
    "plugin",
]


def test_all_is_the_public_surface() -> None:
    assert sorted(upsertmat.conformance.__all__) == sorted(PUBLIC)
    assert len(set(PUBLIC)) == len(PUBLIC)


def test_every_public_name_is_importable_and_is_what_its_module_defines() -> None:
    for name in PUBLIC:
        value = getattr(upsertmat.conformance, name)
        assert value is not None, name
        if name == "plugin":
            assert isinstance(value, types.ModuleType) and value.__name__ == "upsertmat.conformance.plugin"
        elif isinstance(value, type):
            assert value.__module__.startswith("upsertmat.conformance."), (name, value.__module__)
    namespace: dict[str, object] = {}
    exec("from upsertmat.conformance import *", namespace)
    assert set(PUBLIC) <= set(namespace)
    assert issubclass(upsertmat.conformance.Mismatch, AssertionError)


def test_importing_the_package_and_the_plugin_loads_no_hypothesis() -> None:
    code = (
        "import sys, upsertmat.conformance, upsertmat.conformance.plugin; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'hypothesis'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
