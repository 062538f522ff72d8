"""Why retractions matched nothing, reported by ``upsertmat replay`` (docs/cli.md, "Misses").

:class:`MissReporter` takes each miss's explanation from the materializer
(:class:`~upsertmat.spec.MissExplaining`), writes one JSON Lines record per miss to
``--misses FILE``, says the first few in one line each, and folds every explanation into a
:class:`~upsertmat.impls.misses.MissSummary` whose lines end the run on stderr. It only runs when
the materializer counted a miss: inputs that match cost nothing here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from upsertmat.impls.misses import MissSummary
from upsertmat.spec import Change, Materializer, MissExplaining, MissExplanation


class MissReporter:
    """The misses of one replay run: records to a file (optional), descriptions, a summary.

    ``path``: where the JSON Lines records go (None: nowhere); the file is created (or
    truncated) when the reporter is made, so a run without misses leaves it empty. Each
    record is the explanation's :meth:`~upsertmat.spec.MissExplanation.to_json` plus
    ``line`` (the input line's number, from 1) and ``in`` (its stream index).
    """

    def __init__(self, path: Path | None) -> None:
        self.summary = MissSummary()
        self.unexplained = 0  # misses of a materializer that gives no explanation
        self._file: IO[str] | None = None
        if path is not None:
            self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def explain(self, materializer: Materializer, number: int, index: int, change: Change) -> str:
        """The input on line ``number`` (stream index ``index``) missed: record its
        explanation and return a one-line description of it. O(size of the explanation)."""
        explanations: list[MissExplanation] = (
            materializer.take_misses() if isinstance(materializer, MissExplaining) else []
        )
        row = json.dumps(list(change.row), ensure_ascii=False)
        said = f"{change.kind.value} {row} matched no stored row (rule 7: nothing emitted)"
        if not explanations:
            self.unexplained += 1
            return said
        for explanation in explanations:
            self.summary.add(explanation)
            if self._file is not None:
                record = {"line": number, "in": index, **explanation.to_json()}
                self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        return f"{said}: {explanations[-1].reason()}"

    def lines(self) -> list[str]:
        """The end-of-run summary (empty without misses)."""
        lines = self.summary.lines()
        if self.unexplained:
            lines.append(
                f"{self.unexplained:,} retraction(s) matched no stored row (not explained: "
                "upsertmat.misses.max-rows is 0)"
            )
        return lines

    def flush(self) -> None:
        """Write the records so far to the file (at commit points)."""
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        """Close the records file."""
        if self._file is not None:
            self._file.close()
            self._file = None
