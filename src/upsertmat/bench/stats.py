"""Summary statistics of repeated throughput measurements."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    """Median and spread of a non-empty sample: min-max range and inter-quartile range.

    Quartiles use the ``inclusive`` method of :func:`statistics.quantiles` (linear
    interpolation between order statistics, matching min and max at the ends); a sample of
    one has ``q1 == q3 == median``. O(n log n).
    """

    median: float
    minimum: float
    maximum: float
    q1: float
    q3: float
    n: int

    @property
    def iqr(self) -> float:
        """``q3 - q1``."""
        return self.q3 - self.q1

    @property
    def relative_spread(self) -> float:
        """``(max - min) / median``: 0 for a sample of one (or a zero median)."""
        return (self.maximum - self.minimum) / self.median if self.median else 0.0


def summarize(sample: list[float]) -> Summary:
    """The :class:`Summary` of ``sample``. ValueError if it is empty."""
    if not sample:
        raise ValueError("cannot summarize an empty sample")
    median = statistics.median(sample)
    if len(sample) == 1:
        q1 = q3 = median
    else:
        q1, _, q3 = statistics.quantiles(sample, n=4, method="inclusive")
    return Summary(median=median, minimum=min(sample), maximum=max(sample), q1=q1, q3=q3, n=len(sample))
