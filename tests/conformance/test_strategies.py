"""VALUE, MAP, SORTED and ADAPTIVE on heap, RocksDB and LMDB: the whole conformance suite.

ADAPTIVE runs with small thresholds (high 3, low 1) so the suite's short streams convert keys
between VALUE and MAP layouts both ways; once more with the defaults on heap.
"""

from __future__ import annotations

from upsertmat.conformance.suite import MaterializerTests
from upsertmat.impls import Settings

SMALL_THRESHOLDS = Settings(threshold_high=3, threshold_low=1)


class TestValueHeap(MaterializerTests):
    implementation = "VALUE/heap"


class TestValueRocksdb(MaterializerTests):
    implementation = "VALUE/rocksdb"


class TestValueLmdb(MaterializerTests):
    implementation = "VALUE/lmdb"


class TestMapHeap(MaterializerTests):
    implementation = "MAP/heap"


class TestMapRocksdb(MaterializerTests):
    implementation = "MAP/rocksdb"


class TestMapLmdb(MaterializerTests):
    implementation = "MAP/lmdb"


class TestSortedHeap(MaterializerTests):
    implementation = "SORTED/heap"


class TestSortedRocksdb(MaterializerTests):
    implementation = "SORTED/rocksdb"


class TestSortedLmdb(MaterializerTests):
    implementation = "SORTED/lmdb"


class TestAdaptiveHeap(MaterializerTests):
    implementation = "ADAPTIVE/heap"
    impl_settings = SMALL_THRESHOLDS


class TestAdaptiveRocksdb(MaterializerTests):
    implementation = "ADAPTIVE/rocksdb"
    impl_settings = SMALL_THRESHOLDS


class TestAdaptiveLmdb(MaterializerTests):
    implementation = "ADAPTIVE/lmdb"
    impl_settings = SMALL_THRESHOLDS


class TestAdaptiveHeapDefaultThresholds(MaterializerTests):
    implementation = "ADAPTIVE/heap"


class TestAliases(MaterializerTests):
    """``linked-map`` is MAP on heap: the alias resolves through the registry."""

    implementation = "linked-map"
