"""The commit points of ``upsertmat replay``: when state, position and output become durable.

With ``--state-dir`` a run commits every ``interval`` lines (``--checkpoint-every``), at the
end of the input, and when it stops at a bad line, on a signal or because its input could not
be read: the output, dead-letter and misses files are flushed first, then the state and the position
(:class:`~upsertmat.impls.persistence.session.StateSession`) are made durable together. A
line counts for the position only once it is applied (:meth:`Commits.applied`), so a stopped
run's position covers exactly the lines it applied. When writing fails (the output, the
dead-letter file, the state) or an implementation raises, nothing more is committed: the
directory stays at its last commit point. Without ``--state-dir`` the outputs are only flushed.
"""

from __future__ import annotations

from upsertmat.impls.persistence.session import Applied, RunStart, StateSession
from upsertmat.spec import Materializer

from .misses import MissReporter
from .processing import LineProcessor
from .sink import DeadLetters, Output


class Commits:
    """The commit points of one run; ``session`` and ``start`` are None without ``--state-dir``.

    ``interval``: lines between two commit points counted in stream indexes (None: only when
    the run stops). Per line O(1) plus, at a commit point, the session's commit.
    """

    def __init__(
        self,
        session: StateSession | None,
        start: RunStart | None,
        materializer: Materializer,
        processor: LineProcessor,
        output: Output,
        dead_letters: DeadLetters,
        misses: MissReporter,
        interval: int | None,
    ) -> None:
        self._session = session
        self._start = start
        self._materializer = materializer
        self._processor = processor
        self._output = output
        self._dead_letters = dead_letters
        self._misses = misses
        self._interval = interval
        self._mark = None if start is None else start.input.applied

    def begin(self) -> None:
        """The run starts: recorded in the state directory, with the output lengths a resume
        truncates back to."""
        if self._session is not None:
            self._session.begin(
                output_bytes=self._output.length,
                dead_letter_bytes=self._dead_letters.length,
                misses_bytes=self._misses.length,
            )

    def applied(self, line: bytes, index: int) -> None:
        """``line`` (stream index ``index``) is applied: it counts for the position, and a
        commit point follows every ``interval`` stream lines."""
        if self._mark is not None:
            self._mark(line)
            if self._interval is not None and (index + 1) % self._interval == 0:
                self.commit()

    def commit(self) -> None:
        """A commit point: outputs flushed, then state and position durable together."""
        self._flush()
        if self._session is not None:
            self._session.commit(self._materializer, self._applied())

    def finish(self, *, completed: bool) -> None:
        """The last commit point: the whole input applied (``completed``), or the run stopped
        and the same command resumes it after its last applied line."""
        self._flush()
        if self._session is not None:
            self._session.finish(self._materializer, self._applied(), completed=completed)

    def _flush(self) -> None:
        self._output.flush()
        self._dead_letters.flush()
        self._misses.flush()

    def _applied(self) -> Applied:
        processor = self._processor
        return Applied(
            now=processor.now,
            misses=processor.counts.misses,
            output_bytes=self._output.length,
            dead_letter_bytes=self._dead_letters.length,
            arity=processor.shape.arity,
            misses_bytes=self._misses.length,
        )
