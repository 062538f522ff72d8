"""Why retractions matched nothing, reported by ``upsertmat replay`` (docs/cli.md, "Misses").

:class:`MissReporter` takes each miss's explanation from the materializer
(:class:`~upsertmat.spec.MissExplaining`), writes one JSON Lines record per miss to
``--misses FILE``, says the first few in one line each, and folds every explanation into a
:class:`~upsertmat.impls.misses.MissSummary` whose lines end the run on stderr. It only runs when
the materializer counted a miss: inputs that match cost nothing here.

The records file is one of the files a run writes, like ``-o FILE`` (:mod:`.sink`): its length
is committed with the position, and a resumed run truncates it back to that length, so after
any stop and the same command again it holds every miss once. A failed write is said in one
line naming the file (exit 4).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import IO

from upsertmat.errors import CliError, ExitCode
from upsertmat.impls.misses import MissSummary
from upsertmat.spec import Change, Materializer, MissExplaining, MissExplanation

from .failures import io_exit_code
from .sink import AFTER_FAILURE, reopen_truncated


class MissReporter:
    """The misses of one replay run: records to a file (optional), descriptions, a summary.

    ``path``: where the JSON Lines records go (None: nowhere); the file is created (or
    truncated) when the reporter is made, so a run without misses leaves it empty; a
    ``resumed`` run whose records file was ``committed`` bytes long at its last commit point
    (None: the stopped run had none) truncates it to that length instead. ``length`` is the
    file's length as written (None without a file). Each record is the explanation's
    :meth:`~upsertmat.spec.MissExplanation.to_json` plus ``line`` (the input line's number,
    from 1) and ``in`` (its stream index).
    """

    def __init__(self, path: Path | None, *, resumed: bool = False, committed: int | None = None) -> None:
        self.summary = MissSummary()
        self.unexplained = 0  # misses of a materializer that gives no explanation
        self.path = path
        self.length: int | None = None
        self._file: IO[bytes] | None = None
        if path is None:
            return
        if resumed and committed is not None:
            self._file, self.length = reopen_truncated(path, committed, "misses file"), committed
            return
        try:
            self._file = open(path, "wb")  # noqa: SIM115 - closed by close()
        except OSError as error:
            raise CliError(
                f"cannot open --misses file {path}: {error.strerror or error}", io_exit_code(error)
            ) from None
        self.length = 0

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
                self._write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
        return f"{said}: {explanations[-1].reason()}"

    def _write(self, data: bytes) -> None:
        assert self._file is not None and self.length is not None
        try:
            self._file.write(data)
        except OSError as error:
            raise self._failed(error) from None
        self.length += len(data)

    def _failed(self, error: OSError) -> CliError:
        return CliError(
            f"cannot write misses file {self.path}: {error.strerror or error}; {AFTER_FAILURE}", ExitCode.IO
        )

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
        """Hand the records so far to the operating system (before a commit point records the
        file's length)."""
        if self._file is not None:
            try:
                self._file.flush()
            except OSError as error:
                raise self._failed(error) from None

    def close(self) -> None:
        """Close the records file. Records not flushed by then belong to lines after the last
        commit point, which the same command processes again: a failure is ignored."""
        if self._file is not None:
            stream, self._file = self._file, None
            with contextlib.suppress(OSError):
                stream.close()
