"""Third-party Python code on top of the installed build (compiled in the ``py`` tox env).

A strategy written in Python as docs/strategies.md ("How to add a new strategy") says — a
subclass of :class:`StrategyBase` with its own layout — a Python subclass of a built-in
strategy, and a Python backend subclassing :class:`HeapBackend` each pass the conformance
suite (``pytest --upsertmat-impl=module:factory`` in a fresh pytest process, as a user runs
it). On the compiled build their base classes are mypyc native classes
(``allow_interpreted_subclasses``); this is what shows that Python subclasses of them work.
"""

from __future__ import annotations

import pytest

from upsertmat.conformance.scenarios import SCENARIOS

THIRD_PARTY = '''
from upsertmat.impls import Settings
from upsertmat.impls.state.heap import HeapBackend
from upsertmat.impls.strategies.common import DELETE, INSERT, UPDATE_AFTER, StrategyBase, emit, require
from upsertmat.impls.strategies.linked_map import MapMaterializer
from upsertmat.spec import Granularity, Unsupported


class RowListMaterializer(StrategyBase):
    """LEGACY's rules on a layout of its own: one value per key, the list of its rows."""

    strategy_name = "ROWLIST"
    granularity = Granularity.PER_KEY

    def __init__(self, keys, backend, settings=None):
        super().__init__(keys, backend, settings)
        self._lists = self._value_state("rowlist")

    def _find(self, rows, match):
        for index, row in enumerate(rows):
            if self._match_key(row) == match:
                return index
        return -1

    def _add(self, context, match, row, stamp):
        rows = [tuple(stored) for stored in self._lists.get(context) or ()]
        emitted = emit(UPDATE_AFTER if rows else INSERT, row)
        index = self._find(rows, match) if self.keys.upsert_key else -1
        if index < 0:
            rows.append(row)
        else:
            rows[index] = row
        self._lists.put(context, rows)
        return emitted

    def _retract(self, context, match, change, stamp):
        rows = [tuple(stored) for stored in self._lists.get(context) or ()]
        index = self._find(rows, match)
        if index < 0:
            self._miss(context, change)
            return None
        last = index == len(rows) - 1
        del rows[index]
        if not rows:
            self._lists.delete(context)
            return emit(DELETE, change.row)
        self._lists.put(context, rows)
        return emit(UPDATE_AFTER, rows[-1]) if last else None

    def _expire_element(self, context, seq):
        raise AssertionError("no TTL: the factory refuses it")

    def _contexts(self):
        return list(self._lists.contexts())

    def _elements(self, context):
        return [(tuple(row), 0) for row in self._lists.get(context) or ()]

    def _drop(self, context):
        self._lists.delete(context)

    def _load(self, context, elements):
        self._lists.put(context, [tuple(row) for row, _ in elements])

    def _check(self):
        for context in self._lists.contexts():
            require(len(self._lists.get(context) or ()) >= 1, context, "an empty list is stored")


class CommitCountingHeap(HeapBackend):
    """A heap backend that counts its commits (a Python subclass of the built-in one)."""

    def __init__(self):
        super().__init__()
        self.commits = 0

    def commit(self):
        self.commits += 1
        super().commit()


class CheckedMap(MapMaterializer):
    """MAP with every ADD's output checked in Python before it is returned."""

    def _add(self, context, match, row, stamp):
        out = super()._add(context, match, row, stamp)
        assert out.row == row
        return out


def _no_ttl(settings):
    if settings.ttl.enabled:
        raise Unsupported("no state TTL in this implementation")


def row_list(keys, settings):
    _no_ttl(settings)
    return RowListMaterializer(keys, CommitCountingHeap(), Settings())


def checked_map(keys, settings):
    _no_ttl(settings)
    return CheckedMap(keys, CommitCountingHeap(), Settings())
'''


@pytest.fixture
def dev_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "upsertmat-dev")
    monkeypatch.delenv("UPSERTMAT_EXAMPLES_SCALE", raising=False)


@pytest.mark.usefixtures("dev_profile")
@pytest.mark.parametrize("factory", ["row_list", "checked_map"])
def test_python_subclasses_of_the_build_pass_the_suite(pytester: pytest.Pytester, factory: str) -> None:
    pytester.makepyfile(thirdparty=THIRD_PARTY)
    result = pytester.runpytest_subprocess(f"--upsertmat-impl=thirdparty:{factory}", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0, result.stdout.str()[-3000:]
    assert outcomes.get("passed", 0) >= len(SCENARIOS), outcomes
