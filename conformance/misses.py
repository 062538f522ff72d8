"""Rule-7 misses inside the suite: counted and logged at DEBUG, never as warnings.

The model and the shipped implementations log every retraction that matches no stored row
(rule 7) as a WARNING on the ``upsertmat`` logger. Generated streams retract unknown rows on
purpose, so inside the suite these warnings are expected and would bury a real failure under
thousands of captured log lines. While :func:`misses_at_debug` is active, such records are
counted (:data:`MISSES`) and passed on at DEBUG level only when the logger is enabled for DEBUG
(``pytest --log-level=DEBUG`` shows them); every other record is untouched. O(1) per record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

LOGGER = "upsertmat"
MESSAGE_PREFIX = "retraction matched no stored row"


class MissCounter(logging.Filter):
    """A logger filter that counts rule-7 records and demotes them to DEBUG."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.msg, str) and record.msg.startswith(MESSAGE_PREFIX)):
            return True
        self.count += 1
        if not logging.getLogger(LOGGER).isEnabledFor(logging.DEBUG):
            return False
        record.levelno = logging.DEBUG
        record.levelname = logging.getLevelName(logging.DEBUG)
        return True


MISSES = MissCounter()
"""The suite's counter: ``MISSES.count`` rule-7 records seen since the process started."""


@contextmanager
def misses_at_debug() -> Iterator[MissCounter]:
    """Count rule-7 records of the ``upsertmat`` logger and show them at DEBUG only (re-entrant)."""
    logger = logging.getLogger(LOGGER)
    installed = MISSES not in logger.filters
    if installed:
        logger.addFilter(MISSES)
    try:
        yield MISSES
    finally:
        if installed:
            logger.removeFilter(MISSES)
