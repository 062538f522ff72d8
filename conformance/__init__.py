"""upsertmat.conformance — the reusable conformance suite (docs/conformance.md).

What a third party subclasses or calls is exported here, and only that (``__all__``, pinned by
``tests/conformance/test_public_surface.py``):

- **the abstract test classes**: :class:`MaterializerTests` (a materializer against the
  reference model: scenarios, generated streams, state machines, TTL, lifecycle),
  :class:`StateBackendTests` and :class:`PersistentBackendTests` with :func:`machine_for` (a
  keyed-state backend), :class:`ConflictMaterializerTests` (``ON CONFLICT DO NOTHING | DO
  ERROR``);
- **the failure every check raises**: :class:`Mismatch` (an ``AssertionError`` with every input
  and the rule broken);
- **check functions** over a maker ``(Keys) -> Materializer`` (:data:`Maker`):
  :func:`check_scenario`, :func:`check_ttl_scenario`, :func:`check_stream`,
  :func:`check_timed_stream`;
- **the catalogues**: :data:`SCENARIOS` (:class:`Scenario`), :data:`TTL_SCENARIOS`
  (:class:`TtlScenario`), :data:`PINNED`;
- **the Hypothesis generators**: :func:`valid_streams`, :func:`bare_update_streams`,
  :func:`long_histories`, :func:`tolerated_streams`, :func:`any_streams`,
  :func:`timed_streams`, and what they produce (:class:`GeneratedStream`, :class:`TimedStream`,
  :class:`Advance`, :data:`Step`, the keys :data:`KEYS_WITH_UPSERT_KEY` and
  :data:`KEYS_WITHOUT_UPSERT_KEY`);
- **the process protocol** a program under test speaks (``--upsertmat-cmd``): :class:`Program`
  runs one, :func:`encode_step` and :func:`decode_output` are its line formats,
  :class:`Output` an output line, :class:`ProtocolError` a program that broke it;
- **the pytest plugin**: :mod:`plugin` (entry point ``pytest11: upsertmat``: ``--upsertmat-impl``,
  ``--upsertmat-cmd``, ``--upsertmat-quick``; it collects the suite module
  ``upsertmat.conformance.selected`` by import name).

The rest are the suite's own parts, importable but not promised: its modules at this level
(``suite``, ``backends``, ``checks``, ``generators``, ``scenarios``, ``mismatch``, ``machine``,
``lifecycle``, ``pinned``, ``tables``, ``profiles``, ``misses``, ``protocol``), the
``ON CONFLICT`` family in :mod:`.conflict`, the program-under-test checks in :mod:`.program`,
and the tools behind ``upsertmat conformance``, ``conformance-reproduce``,
``conformance-matrix`` and ``conformance-flink`` in :mod:`.tools`.

The names are imported on first use: the plugin is loaded by pytest wherever upsertmat is
installed and must not import Hypothesis or an implementation before the suite is selected.
Needs the ``conformance`` extra (pytest, Hypothesis). Layering: ``conformance`` imports only
``impls`` and ``spec`` (``tests/test_layers.py``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import plugin
    from .backends import PersistentBackendTests, StateBackendTests, machine_for
    from .checks import Maker, check_scenario, check_stream, check_timed_stream, check_ttl_scenario
    from .conflict.suite import ConflictMaterializerTests
    from .generators import (
        KEYS_WITH_UPSERT_KEY,
        KEYS_WITHOUT_UPSERT_KEY,
        Advance,
        GeneratedStream,
        Step,
        TimedStream,
        any_streams,
        bare_update_streams,
        long_histories,
        timed_streams,
        tolerated_streams,
        valid_streams,
    )
    from .mismatch import Mismatch
    from .pinned import PINNED
    from .protocol import Output, Program, ProtocolError, decode_output, encode_step
    from .scenarios import SCENARIOS, TTL_SCENARIOS, Scenario, TtlScenario
    from .suite import MaterializerTests

_HOMES: dict[str, str] = {
    "MaterializerTests": ".suite",
    "StateBackendTests": ".backends",
    "PersistentBackendTests": ".backends",
    "machine_for": ".backends",
    "ConflictMaterializerTests": ".conflict.suite",
    "Mismatch": ".mismatch",
    "Maker": ".checks",
    "check_scenario": ".checks",
    "check_ttl_scenario": ".checks",
    "check_stream": ".checks",
    "check_timed_stream": ".checks",
    "Scenario": ".scenarios",
    "SCENARIOS": ".scenarios",
    "TtlScenario": ".scenarios",
    "TTL_SCENARIOS": ".scenarios",
    "PINNED": ".pinned",
    "GeneratedStream": ".generators",
    "TimedStream": ".generators",
    "Advance": ".generators",
    "Step": ".generators",
    "KEYS_WITH_UPSERT_KEY": ".generators",
    "KEYS_WITHOUT_UPSERT_KEY": ".generators",
    "valid_streams": ".generators",
    "bare_update_streams": ".generators",
    "long_histories": ".generators",
    "tolerated_streams": ".generators",
    "any_streams": ".generators",
    "timed_streams": ".generators",
    "Program": ".protocol",
    "ProtocolError": ".protocol",
    "Output": ".protocol",
    "encode_step": ".protocol",
    "decode_output": ".protocol",
    "plugin": ".plugin",
}
"""Each public name -> the module that defines it."""

__all__ = [
    "KEYS_WITHOUT_UPSERT_KEY",
    "KEYS_WITH_UPSERT_KEY",
    "PINNED",
    "SCENARIOS",
    "TTL_SCENARIOS",
    "Advance",
    "ConflictMaterializerTests",
    "GeneratedStream",
    "Maker",
    "MaterializerTests",
    "Mismatch",
    "Output",
    "PersistentBackendTests",
    "Program",
    "ProtocolError",
    "Scenario",
    "StateBackendTests",
    "Step",
    "TimedStream",
    "TtlScenario",
    "any_streams",
    "bare_update_streams",
    "check_scenario",
    "check_stream",
    "check_timed_stream",
    "check_ttl_scenario",
    "decode_output",
    "encode_step",
    "long_histories",
    "machine_for",
    "plugin",
    "timed_streams",
    "tolerated_streams",
    "valid_streams",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (then a plain attribute)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(home, __name__)
    value = module if name == "plugin" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
