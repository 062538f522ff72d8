"""Each heap specialisation is checked against its strategy's one statement of the rules.

``impls/strategies/variants.py`` pairs every general layout (the module that states a
strategy's rules against the state protocols) with its heap specialisation. Here both run
side by side on heap backends, the general class built directly (it then runs through the
heap states' interface, exactly as on any backend), the specialisation through the table:
same outputs input for input, same rule-7 misses, same exported elements, and both layouts'
``_check()``, on streams that hit misses, duplicates, rule-4 replacements, ``+U`` into empty
keys and (ADAPTIVE) conversions both ways, with and without an upsert key. The conformance
suite checks each of them against the model as well; this pins the pairing itself.
"""

from __future__ import annotations

import random

import pytest

from upsertmat.impls import Settings
from upsertmat.impls.state.heap import HeapBackend
from upsertmat.impls.strategies.common import StrategyBase
from upsertmat.impls.strategies.variants import HEAP_VARIANTS, build
from upsertmat.spec import Keys

from .support import NO_UPSERT_KEY, UPSERT_KEY, tolerated, valid_stream

SETTINGS = Settings(threshold_high=4, threshold_low=2)  # ADAPTIVE converts often


@pytest.mark.parametrize("keys", [NO_UPSERT_KEY, UPSERT_KEY], ids=["whole-row", "upsert-key"])
@pytest.mark.parametrize("general", list(HEAP_VARIANTS), ids=lambda cls: cls.__name__)
def test_the_heap_specialisation_gives_the_general_layouts_results(
    general: type[StrategyBase], keys: Keys
) -> None:
    for seed in range(3):
        rnd = random.Random(seed)
        changes = tolerated(rnd, 150) + valid_stream(rnd, 150, keys)
        reference = general(keys, HeapBackend(), SETTINGS)
        twin = build(general, keys, HeapBackend(), SETTINGS)
        assert type(twin) is HEAP_VARIANTS[general] and type(reference) is general
        for step, change in enumerate(changes):
            assert twin.process(change) == reference.process(change), f"seed {seed} step {step}"
            assert twin.retract_misses == reference.retract_misses
            if step % 25 == 0:
                twin._check()
                reference._check()
        assert list(twin.export_elements()) == list(reference.export_elements()), f"seed {seed}"
        twin._check()
        reference._check()
