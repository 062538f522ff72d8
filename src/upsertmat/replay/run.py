"""One ``upsertmat replay`` run: the input's lines through the processor, with commit points.

:func:`replay` wires the parts together — the state directory
(:class:`~upsertmat.impls.persistence.session.StateSession`: where this input starts), the
input (:mod:`.source`), the processing of a line (:mod:`.processing`), the output and
dead-letter files (:mod:`.sink`), the commit points (:mod:`.commits`) — runs the loop and
turns every way a run can stop into a message and an exit code (docs/cli.md):

- the end of the input: the last commit point marks the run finished (exit 0);
- a bad line (or an ``ON CONFLICT DO ERROR`` conflict) with ``--on-error fail``: committed up
  to the line before it (exit 1); the same command again stops at the same line, and goes on
  from it once it is fixed (or with ``--on-error skip``);
- SIGINT/SIGTERM: committed up to the last line processed (exit 130/143);
- a failed read of the input: committed up to the last line read (exit 4);
- a failed write (output, dead letters, state) or an implementation error: nothing more is
  committed (exit 4, 3 for damaged state, 70 for a bug).

Per line the cost is the materializer's plus O(length of the line).
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from upsertmat.errors import CliError, ExitCode
from upsertmat.impls.persistence.inputs import is_regular
from upsertmat.impls.persistence.session import Rerun, RunStart, StateSession
from upsertmat.impls.persistence.statedir import DEAD_LETTER_NAME
from upsertmat.impls.settings import Settings, TimeDomain
from upsertmat.impls.state.errors import StateError
from upsertmat.spec import Keys, Materializer

from ..interrupt import StopSignals
from .commits import Commits
from .failures import close_materializer, damage_behind, state_failure
from .jsonl import BadLine, RowShape
from .messages import PREFIX, say
from .misses import MissReporter
from .paths import check_distinct_files
from .processing import ConflictAtWatermark, LineProcessor
from .progress import Progress
from .sink import DeadLetters, Output, ReaderGone
from .source import InputFailed, close_input, open_input, read_failure

DEFAULT_DEAD_LETTER = "upsertmat-dead-letter.jsonl"
_T = TypeVar("_T")


@dataclass(frozen=True)
class ReplayOptions:
    """What a replay is asked to do (the command line's options, checked).

    ``input``/``output``: paths, ``-`` for stdin/stdout. ``fail``: ``--on-error fail``.
    ``dead_letter``: the dead-letter file (None: the default, in the state directory or the
    working directory). ``checkpoint_every``, ``stream_line``: need ``state_dir``.
    ``progress``: None = only when stderr is a terminal.
    """

    input: str
    output: str
    keys: Keys
    settings: Settings
    arity: int | None = None
    fail: bool = True
    dead_letter: Path | None = None
    state_dir: Path | None = None
    checkpoint_every: int | None = None
    stream_line: int | None = None
    progress: bool | None = None
    quiet: bool = False
    misses: Path | None = None
    """``--misses FILE``: one JSON Lines record per rule-7 miss, explained (None: none)."""


Create = Callable[[Keys, Settings], Materializer]


@contextlib.contextmanager
def _library_warnings_silenced() -> Iterator[None]:
    """The run reports rule-7 misses itself (with line numbers); mute the library's log."""
    logger = logging.getLogger("upsertmat")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def dead_letter_path(options: ReplayOptions) -> Path:
    """The dead-letter file of ``options``: ``--dead-letter``, else in the state directory,
    else in the working directory."""
    if options.dead_letter is not None:
        return options.dead_letter
    if options.state_dir is not None:
        return options.state_dir / DEAD_LETTER_NAME
    return Path(DEFAULT_DEAD_LETTER)


def _written_files(options: ReplayOptions) -> list[tuple[str, Path]]:
    """The files a run of ``options`` writes, each with the flag that names it."""
    written = [("-o", Path(options.output))] if options.output != "-" else []
    if options.misses is not None:
        written.append(("--misses", options.misses))
    if not options.fail:
        written.append(("--dead-letter", dead_letter_path(options)))
    return written


def replay(options: ReplayOptions, create: Create) -> int:
    """Run ``options``; return the exit code. ``create`` builds the materializer (for the
    settings of the state directory, if any). Errors the caller reports in one line are
    :class:`~upsertmat.errors.CliError` and state-directory refusals."""
    check_distinct_files(options.input, _written_files(options))
    with contextlib.ExitStack() as stack:
        settings = options.settings
        session: StateSession | None = None
        if options.state_dir is not None:
            session = stack.enter_context(
                StateSession(options.state_dir, options.keys, settings, options.arity)
            )
            settings = session.settings
        materializer = create(options.keys, settings)

        def close(kind: object, error: BaseException | None, traceback: object) -> None:
            close_materializer(materializer, error)

        stack.push(close)
        if session is not None:
            try:
                session.attach(materializer)
            except StateError as error:
                raise state_failure(error, session) from None
        source = open_input(options.input)
        if options.input != "-":
            stack.callback(close_input, source)
        start: RunStart | None = None
        lines: Iterable[bytes] = source
        if session is not None:
            try:
                opened = session.open_input(source, options.input, stream_line=options.stream_line)
            except OSError as error:  # reading what the state has applied already
                shown = "stdin" if options.input == "-" else options.input
                raise CliError(
                    f"cannot read input {shown}: {error.strerror or error}; nothing was changed: run the "
                    "same command again once it reads",
                    ExitCode.IO,
                ) from None
            if isinstance(opened, Rerun):
                say(opened.message)
                return int(ExitCode.OK)
            start, lines = opened, opened.input
            if start.note is not None:
                say(start.note)
        job = _Replay(options, settings, session, start, materializer, stack, regular=is_regular(source))
        return job.run(lines)
    raise AssertionError("unreachable")  # pragma: no cover - ExitStack does not swallow


class _Replay:
    """A run with its parts opened; :meth:`run` is the loop and the handling of its stops."""

    def __init__(
        self,
        options: ReplayOptions,
        settings: Settings,
        session: StateSession | None,
        start: RunStart | None,
        materializer: Materializer,
        stack: contextlib.ExitStack,
        *,
        regular: bool,
    ) -> None:
        self.options = options
        self.settings = settings
        self.session = session
        self.start = start
        self.materializer = materializer
        interval = None
        if session is not None:
            interval = session.checkpoint_interval(options.checkpoint_every or settings.checkpoint_interval)
        # Changes reach a pipe's reader at once; a file's are flushed at commit points.
        flush_each = interval is None or not regular
        self.dead_letters = DeadLetters(dead_letter_path(options), flush_each=flush_each)
        stack.callback(self.dead_letters.close)
        resumed = start is not None and start.resumed
        if start is not None and resumed:
            say(f"resuming the unfinished run from stream line in={start.index}")
            self.dead_letters.resume(start.dead_letter_bytes)
            if options.output == "-":
                say(
                    "stdout cannot be truncated: changes written after the last commit may repeat (same 'in')"
                )
        elif start is not None:
            self.dead_letters.measure()
        committed = start.output_bytes if start is not None else None
        self.output = Output.open(options.output, flush_each=flush_each, resumed=resumed, committed=committed)
        stack.callback(self.output.close)
        self.misses = MissReporter(
            options.misses, resumed=resumed, committed=None if start is None else start.misses_bytes
        )
        stack.callback(self.misses.close)
        shape = RowShape(options.keys, options.arity if session is None else session.arity)
        need_ts = settings.ttl.enabled and settings.ttl.time_domain is TimeDomain.EVENT_TIME
        self.processor = LineProcessor(
            materializer, shape, self.output, self.dead_letters, self.misses,
            fail=options.fail, need_ts=need_ts, quiet=options.quiet,
            partition=None if session is None else session.partition, keys=options.keys,
        )  # fmt: skip
        self.commits = Commits(
            session,
            start,
            materializer,
            self.processor,
            self.output,
            self.dead_letters,
            self.misses,
            interval,
        )
        self.stack = stack

    def run(self, lines: Iterable[bytes]) -> int:
        """The loop, and what each way of stopping means (module docstring)."""
        self.stack.enter_context(_library_warnings_silenced())
        guard = self.stack.enter_context(StopSignals())
        try:
            try:
                code = self._translated(self._body, lines, guard)
            except KeyboardInterrupt:
                guard.busy = True  # a second signal must not interrupt the save
                code = guard.exit_code
                self._translated(self.commits.finish, completed=False)
            except InputFailed as error:
                guard.busy = True
                self._translated(self.commits.finish, completed=False)
                saved = f"; state saved in {self.session.path} up to the line before" if self.session else ""
                raise CliError(
                    f"{error.message}{saved}: run the same command again to go on", ExitCode.IO
                ) from None
        except ReaderGone:
            # The reader went away (`replay ... | head`): exit quietly, as Unix tools do; the
            # state directory (if any) stays at its last commit.
            return 128 + signal.SIGPIPE
        self._summary(code)
        return int(code)

    def _body(self, lines: Iterable[bytes], guard: StopSignals) -> int:
        guard.busy = True  # a signal now stops the run before its first line
        self.commits.begin()
        code = self._loop(lines, guard)
        guard.busy = True  # the run is over: a signal now changes nothing
        self.commits.finish(completed=code == ExitCode.OK)
        if self.output.reader_gone():
            raise ReaderGone
        return code

    def _translated(self, step: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``step(*args, **kwargs)``, a state error turned into what it means for the run."""
        try:
            return step(*args, **kwargs)
        except StateError as error:
            raise state_failure(error, self.session) from None
        except (ArithmeticError, AssertionError, LookupError, TypeError, ValueError) as error:
            session = self.session
            damage = (
                damage_behind(self.materializer, self.settings) if session and session.in_database else None
            )
            if damage is None:
                raise
            raise state_failure(damage, session) from error

    def _loop(self, lines: Iterable[bytes], guard: StopSignals) -> int:
        """Apply every line; OK at the end of the input, BAD_INPUT at a bad line that fails
        the run, 128 + the signal's number after a signal."""
        counts = self.processor.counts
        index = 0 if self.start is None else self.start.index
        number = 1 if self.start is None else self.start.number
        progress = Progress(PREFIX, Progress.wanted(self.options.progress))
        if guard.received is not None:
            return guard.exit_code
        line, applied, update = self.processor.line, self.commits.applied, progress.update
        lines = iter(lines)
        guard.busy = False
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                break
            except OSError as error:  # between two lines: every line before it is applied
                raise read_failure(error, self.options.input) from None
            guard.busy = True
            try:
                line(raw, index, number)
            except BadLine as error:
                progress.finish(counts.lines, counts.emitted, counts.skipped)
                self._stopped(number, index, error)
                return ExitCode.BAD_INPUT
            applied(raw, index)
            index += 1
            number += 1
            update(counts.lines, counts.emitted, counts.skipped)
            guard.busy = False
            if guard.received is not None:
                progress.finish(counts.lines, counts.emitted, counts.skipped)
                return guard.exit_code
        guard.busy = True
        if self.session is None:
            # The end of the input is the final watermark of ON CONFLICT DO ERROR | NOTHING
            # (docs/cli.md); with --state-dir the stream goes on in the next run.
            try:
                self.processor.final_watermark(index, number)
            except BadLine as error:
                progress.finish(counts.lines, counts.emitted, counts.skipped)
                say(f"at the end of the input (the final watermark): {error}")
                return ExitCode.BAD_INPUT
        progress.finish(counts.lines, counts.emitted, counts.skipped)
        return ExitCode.OK

    def _stopped(self, number: int, index: int, error: BadLine) -> None:
        say(f"line {number}: {error}")
        where = ""
        if self.session is not None:
            then = "fix the line and run the same command again to go on from it"
            if isinstance(error, ConflictAtWatermark):
                then = (
                    "the same command again stops at this watermark again; with --on-error skip it writes "
                    "the conflict to the dead-letter file, keeps the key's current row and goes on"
                )
            where = f"; state saved in {self.session.path}, its next line is in={index}: {then}"
        say(
            f"stopped at line {number} (lines count from 1, blank lines included); "
            f"the {number - 1} line(s) before it are processed{where}"
        )

    def _summary(self, code: int) -> None:
        """Report skipped lines and misses beyond the ones shown, and an interruption."""
        counts = self.processor.counts
        if counts.skipped:
            say(f"skipped {counts.skipped} bad line(s); they are in {self.dead_letters.path}")
        if counts.routed_elsewhere and self.session is not None:
            say(
                f"skipped {counts.routed_elsewhere} change(s) of key groups other instances own: "
                f"{self.session.path} is {self.session.partition} (docs/operations.md, Rescaling)"
            )
        if counts.misses and not self.options.quiet:
            for line in self.misses.lines():
                say(line)
        if code >= 128:
            if self.session is not None:
                saved = "state saved: run the same command again to go on"
                say(f"interrupted after {counts.lines} line(s); {saved}")
            else:
                say("interrupted")
