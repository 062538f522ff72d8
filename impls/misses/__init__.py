"""Explanations of rule-7 misses at run time: what a materializer records, and a run's summary.

:class:`~.recorder.MissRecorder` is what a strategy holds when explanations are on
(``upsertmat.misses.max-rows`` > 0): the explanations not yet taken and the keys whose rows
expired by TTL. :class:`~.summary.MissSummary` folds explanations into counters per cause and
per column, with a hint for each column that keeps differing. The explanation itself is
defined in :mod:`upsertmat.spec.misses`.
"""

from .recorder import MissRecorder
from .summary import ColumnStats, MissSummary

__all__ = ["ColumnStats", "MissRecorder", "MissSummary"]
