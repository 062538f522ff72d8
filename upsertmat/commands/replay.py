"""``upsertmat replay``: run a JSON Lines changelog through a materializer (docs/cli.md).

One input line at a time: parse it (:mod:`upsertmat.replay.jsonl`), check its row's shape, feed it to
the materializer (or advance the clock), write the emitted change. Per line the cost is the
materializer's plus O(length of the line). With ``--state-dir`` the state and the stream
position persist (:mod:`upsertmat.impls.persistence.session`), so a stream split over several runs produces,
concatenated, exactly the output of one run, and rerunning any command is safe.

Commit points (with ``--state-dir``): every ``--checkpoint-every`` lines, at the end of the
input, at a bad line with ``--on-error fail`` (everything before that line), on SIGINT/SIGTERM
(everything up to the last fully processed line) and when reading the input fails; the output
is flushed first, then state and position are made durable together. When writing the output
or the state fails, or an implementation raises, nothing more is committed: the directory stays
at its last commit, and the same command again resumes from there (docs/operations.md).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import io
import logging
import os
import select
import signal
import stat
import struct
import sys
import termios
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import IO, Any

from upsertmat.commands.options import (
    add_config_arguments,
    create_materializer,
    non_negative_int,
    parse_columns,
    positive_int,
    settings_from_args,
)
from upsertmat.commands.progress import Progress
from upsertmat.errors import CliError, ExitCode, StateDirError
from upsertmat.impls import ConfigError, Settings
from upsertmat.impls.config import CHECKPOINT_INTERVAL
from upsertmat.impls.conflict import Compacting
from upsertmat.impls.persistence.recovery import (
    EMPTY_SHA256,
    ConsumedInput,
    Position,
    is_regular,
    match_runs,
    reopen_truncated,
    size_or_none,
)
from upsertmat.impls.persistence.session import StateSession
from upsertmat.impls.persistence.statedir import DEAD_LETTER_NAME, is_json_value
from upsertmat.impls.settings import DEFAULT_CHECKPOINT_INTERVAL, TimeDomain
from upsertmat.impls.state.errors import CorruptStateError, StateError, StorageError
from upsertmat.replay.jsonl import (
    BadLine,
    ChangeLine,
    RowShape,
    format_change,
    format_dead_letter,
    parse_line,
)
from upsertmat.replay.misses import MissReporter
from upsertmat.spec import Change, ConflictError, Keys, Materializer, parse_equalizer

NAME = "replay"
PREFIX = f"upsertmat {NAME}"
DEFAULT_DEAD_LETTER = "upsertmat-dead-letter.jsonl"
SHOWN_MESSAGES = 10  # per kind (bad lines, retraction misses); the rest are only counted

EPILOG = """\
input, one JSON object per line (blank lines are skipped but counted):
  {"op": "+I", "row": [1, 10, "a1"], "ts": 17}    a change: op +I, -U, +U or -D; ts optional
  {"time": 1002}                                  a clock advance (ms)
output, one line per emitted change (in = 0-based index of the input line that caused it):
  {"in": 0, "op": "+I", "row": [1, 10, "a1"]}

line numbers in messages count from 1 and include blank lines.
exit codes: 0 ok, 1 bad input line (--on-error fail), 2 usage or configuration error,
  3 state directory locked/mismatched/damaged, 4 I/O error mid-run, 70 internal error,
  130/143 interrupted by SIGINT/SIGTERM.

examples:
  upsertmat replay --pk 0 --strategy legacy --backend heap examples/out-of-order.jsonl
  upsertmat replay --pk 0 --upsert-key 1 examples/out-of-order.jsonl -o out.jsonl
  upsertmat replay --pk 0 --state-dir st part1.jsonl && upsertmat replay --pk 0 --state-dir st part2.jsonl
  producer | upsertmat replay --pk 0,2 --on-error skip --dead-letter bad.jsonl - | consumer
  upsertmat replay --pk 0 --config job.yaml --set table.exec.state.ttl=0 in.jsonl
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``replay`` with the top-level parser."""
    parser = subparsers.add_parser(
        NAME,
        help="replay a JSON Lines changelog through a materializer",
        description="Replay a JSON Lines changelog (+I -U +U -D) through a sink upsert materializer\n"
        "keyed by the sink primary key, and write the emitted upsert changes as JSON Lines.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "input", nargs="?", default="-", metavar="INPUT", help="input file; - = stdin (default)"
    )
    parser.add_argument(
        "-o", "--output", default="-", metavar="FILE", help="output file; - = stdout (default)"
    )
    keys = parser.add_argument_group("keys")
    keys.add_argument(
        "--pk",
        required=True,
        type=parse_columns,
        metavar="COLS",
        help="sink primary key columns, e.g. 0 or 0,2",
    )
    keys.add_argument(
        "--upsert-key",
        default=(),
        type=parse_columns,
        metavar="COLS",
        help="upsert key columns (default: none)",
    )
    keys.add_argument(
        "--equalizer",
        default="canonical",
        metavar="NAME",
        help="how rows are matched: canonical (default), case-insensitive, ignore-columns:I[,J] "
        "(positions within the compared values); kept in --state-dir",
    )
    keys.add_argument(
        "--arity",
        type=positive_int,
        metavar="N",
        help="columns every row must have (default: fixed by the first change; kept in --state-dir)",
    )
    errors = parser.add_argument_group("bad input")
    errors.add_argument(
        "--on-error",
        choices=("fail", "skip"),
        default="fail",
        help="fail: stop at a bad line (exit 1); skip: write it to the dead-letter file and go on",
    )
    errors.add_argument(
        "--dead-letter",
        type=Path,
        metavar="FILE",
        help=f"where --on-error skip appends bad lines (default: DIR/{DEAD_LETTER_NAME} "
        f"with --state-dir, else ./{DEFAULT_DEAD_LETTER})",
    )
    parser.add_argument(
        "--state-dir", type=Path, metavar="DIR", help="keep state and the line count in DIR across runs"
    )
    parser.add_argument(
        "--checkpoint-every",
        type=positive_int,
        metavar="N",
        help="with --state-dir: commit state, position and output every N lines (shortcut for "
        f"{CHECKPOINT_INTERVAL}; default {DEFAULT_CHECKPOINT_INTERVAL} on rocksdb/lmdb; heap: only when "
        "the run stops, as a checkpoint is a full snapshot). A killed run resumes from the last commit",
    )
    parser.add_argument(
        "--stream-line",
        type=non_negative_int,
        metavar="N",
        help="with --state-dir: the stream index (in) of this input's first line; lines the state "
        "has applied already are skipped. Needed for stdin after the first run (docs/operations.md)",
    )
    parser.add_argument(
        "--max-int-digits",
        type=non_negative_int,
        metavar="N",
        help=f"longest integer (in digits) accepted in the input and written to the output (default "
        f"{sys.get_int_max_str_digits()}, Python's; 0 = no limit)",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress line on stderr (default: only when stderr is a terminal)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no warnings (retractions that match nothing)"
    )
    parser.add_argument(
        "--misses",
        type=Path,
        metavar="FILE",
        help="write why each retraction matched no stored row, one JSON object per line (the closest "
        "stored rows of its key and the columns that differ; docs/cli.md). The summary of them ends "
        "the run on stderr either way",
    )
    add_config_arguments(parser)
    parser.set_defaults(run=run)


@dataclass
class _Counts:
    """What a run did so far (this run only)."""

    consumed: int = 0  # lines consumed (processed, blank or skipped)
    emitted: int = 0
    skipped: int = 0
    misses: int = 0


class _SignalGuard:
    """SIGINT/SIGTERM stop the run at a line boundary.

    While a line is being processed (``busy``) a signal only sets ``received``, and the loop
    stops after the line; otherwise (waiting for input) it raises KeyboardInterrupt at once.
    Handlers are installed only in the main thread and restored on exit.
    """

    def __init__(self) -> None:
        self.busy = False
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> _SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = signum
        if not self.busy:
            raise KeyboardInterrupt


@contextlib.contextmanager
def _library_warnings_silenced() -> Iterator[None]:
    """The CLI reports rule-7 misses itself (with line numbers); mute the library's log."""
    logger = logging.getLogger("upsertmat")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _say(message: str) -> None:
    print(f"{PREFIX}: {message}", file=sys.stderr, flush=True)


class _Run:
    """One invocation: owns the materializer, the streams, the counters and the run's position.

    With ``--state-dir`` (a :class:`~upsertmat.impls.persistence.session.StateSession`) a run goes through:
    :meth:`restore` (load the state and its committed position), :meth:`plan` (is this input a
    resume of an unfinished run, a rerun of a finished one, or a continuation of the stream?),
    :meth:`begin`, the loop with a commit every ``interval`` lines, and :meth:`finish`.
    docs/operations.md has the rules.
    """

    def __init__(
        self, args: argparse.Namespace, settings: Settings, keys: Keys, session: StateSession | None
    ) -> None:
        self.args = args
        self.settings = settings
        self.keys = keys
        self.session = session
        self.shape = RowShape(keys, args.arity if session is None else session.arity)
        self.position: Position | None = None  # the committed position this run starts from
        self.run_id = 0
        self.base = 0  # stream index of this run's next line (after lines skipped on resume)
        self.run_start = 0  # stream index of the first line of this run's input
        self.resuming = False  # continue the unfinished run of the state directory
        self.new_run = False
        self.skip_lines = 0  # with --stream-line: lines of the input applied before
        self.misses_base = 0  # rule-7 misses before this run
        self.out_bytes: int | None = None  # length of -o FILE (None for stdout)
        self.dead_bytes: int | None = None  # length of the dead-letter file (None: absent)
        self.now = 0
        self.counts = _Counts()
        self.need_ts = settings.ttl.enabled and settings.ttl.time_domain is TimeDomain.EVENT_TIME
        self.dead_letter_path = self._dead_letter_path()
        self._dead_letter: IO[bytes] | None = None
        self.input: ConsumedInput | None = None
        self.input_name = "-" if args.input == "-" else os.path.abspath(args.input)
        self.input_regular = False  # a regular file can be read twice; stdin and pipes cannot
        self.sink: IO[bytes] | None = None
        self.reporter = _miss_reporter(args.misses)
        requested = args.checkpoint_every or settings.checkpoint_interval
        self.interval = None if session is None else session.checkpoint_interval(requested)

    def _dead_letter_path(self) -> Path:
        if self.args.dead_letter is not None:
            return Path(self.args.dead_letter)
        if self.session is not None:
            return self.session.path / DEAD_LETTER_NAME
        return Path(DEFAULT_DEAD_LETTER)

    # -- state directory -------------------------------------------------------------------

    def restore(self, materializer: Materializer) -> None:
        """Load the state into ``materializer``; the committed position is where this run starts."""
        assert self.session is not None
        position = self.session.attach(materializer)
        self.position = position
        self.now, self.misses_base, self.base = position.now, position.misses, position.lines

    def plan(self, source: IO[bytes]) -> str | None:
        """Decide what this input is; None to go on, or the message of a rerun (nothing to do).

        See docs/operations.md, "Rerunning is always safe".
        """
        assert self.session is not None and self.session.manifest is not None and self.position is not None
        manifest, position = self.session.manifest, self.position
        self.input = ConsumedInput(source)
        explicit = self.args.stream_line
        if explicit is not None:
            if explicit > position.lines:
                raise StateDirError(
                    f"--stream-line {explicit} is beyond the state directory's position: it has applied "
                    f"stream lines 0 to {position.lines - 1} (the next is {position.lines}); lines would be "
                    "missing"
                )
            if manifest.in_progress and explicit == manifest.run_start and manifest.input_sha256 is not None:
                self._resume_from(position, check=False)
                return None
            self.skip_lines = position.lines - explicit
            self._start_new(explicit)
            return None
        if manifest.in_progress:
            if manifest.input_sha256 is None:  # an older upsertmat's killed run: lines only
                self.skip_lines = position.lines - manifest.run_start
                self.resuming, self.run_start = True, manifest.run_start
                self.out_bytes = position.output_bytes
                return None
            self._resume_from(position, check=True)
            return None
        if not self.input_regular:
            if position.lines:
                raise StateDirError(
                    "cannot tell a rerun from a continuation: the input is not a regular file (stdin or a "
                    f"pipe) and {self.session.path} has applied {position.lines} stream line(s) already; "
                    "pass --stream-line N, the stream index of this input's first line "
                    f"(N={position.lines} to continue the stream; a smaller N skips lines already applied)"
                )
            self._start_new(position.lines)
            return None
        match = match_runs(source, manifest.runs)
        if match is not None and match[0] == "rerun":
            rerun = match[1]
            last = rerun.first_line + rerun.lines - 1
            return (
                f"{self.args.input} was already applied completely by run {rerun.run} (stream lines "
                f"{rerun.first_line} to {last}); nothing to do: {self.session.path} and the output are "
                "unchanged"
            )
        if match is not None:
            rerun = match[1]
            raise StateDirError(
                f"{self.args.input} begins with the whole input of run {rerun.run} (stream lines "
                f"{rerun.first_line} to {rerun.first_line + rerun.lines - 1}) and has more: to apply only "
                f"its new lines, pass --stream-line {rerun.first_line}; to apply all of it again as new "
                f"stream lines, pass --stream-line {position.lines}"
            )
        self._start_new(position.lines)
        return None

    def _resume_from(self, position: Position, *, check: bool) -> None:
        """Go on with the unfinished run: skip the consumed input, truncate the output files."""
        assert self.session is not None and self.session.manifest is not None and self.input is not None
        manifest = self.session.manifest
        if check and not (
            self.input.skip(position.input_bytes) and self.input.digest() == position.input_sha256
        ):
            raise StateDirError(
                f"{self.session.path} holds an unfinished run (run {manifest.run_id}, stopped after "
                f"{position.input_bytes} bytes = stream line {position.lines} of its input "
                f"{manifest.input}), and this input does not begin with those bytes: rerun it with the same "
                f"input to finish it, or pass --stream-line {position.lines} to go on with this input as "
                "new stream lines"
            )
        if not check:
            self.skip_lines = position.lines - manifest.run_start
        self.resuming, self.run_start = True, manifest.run_start
        self.out_bytes, self.dead_bytes = position.output_bytes, position.dead_letter_bytes

    def _start_new(self, first_line: int) -> None:
        self.new_run, self.run_start = True, first_line
        self.out_bytes = None if self.args.output == "-" else 0
        self.dead_bytes = size_or_none(self.dead_letter_path)

    def open_output(self) -> IO[bytes]:
        """The output: truncated to the committed length when resuming, else new."""
        name = self.args.output
        if self.resuming and self.input is not None and self.skip_lines:
            if self.input.skip_lines(self.skip_lines) < self.skip_lines:
                raise StateDirError(
                    f"cannot resume the killed run on {self.session.path if self.session else ''}: its "
                    f"checkpoint is {self.skip_lines} line(s) into its input, but this input is shorter; "
                    "resume with the same input"
                )
        elif self.input is not None and self.skip_lines:
            skipped = self.input.skip_lines(self.skip_lines)
            if skipped < self.skip_lines:
                _say(f"all {skipped} line(s) of the input were applied before (--stream-line); nothing to do")
        if self.resuming:
            _say(f"resuming the unfinished run from stream line in={self.base}")
            self._truncate_dead_letter()
            if name == "-":
                _say(
                    "stdout cannot be truncated: changes written after the last commit may repeat (same 'in')"
                )
                return _open_output(name)
            if self.out_bytes is None:
                self.out_bytes = 0
                return _open_output(name)
            return reopen_truncated(name, self.out_bytes, "output")
        return _open_output(name)

    def _truncate_dead_letter(self) -> None:
        path = self.dead_letter_path
        if not path.exists():
            return
        try:
            os.truncate(path, self.dead_bytes or 0)
        except OSError as error:
            raise StateDirError(f"cannot truncate dead-letter file {path}: {error.strerror}") from None

    def begin(self, materializer: Materializer, sink: IO[bytes]) -> None:
        """Record the start of a new run (or hold the commits of a resumed one)."""
        self.sink = sink
        if self.session is None:
            return
        assert self.position is not None
        if self.new_run:
            first = replace(self.position, output_bytes=self.out_bytes, dead_letter_bytes=self.dead_bytes)
            self.position = self.session.start_run(first, self.run_start, self.input_name)
        self.run_id = self.position.run_id
        self.session.hold()

    def _position(self, *, done: bool) -> Position:
        assert self.session is not None and self.session.manifest is not None
        consumed = self.input
        return Position(
            run_id=self.run_id,
            lines=self.base + self.counts.consumed,
            now=self.now,
            misses=self._misses(),
            output_bytes=self.out_bytes,
            input_bytes=0 if consumed is None else consumed.bytes,
            input_sha256=EMPTY_SHA256 if consumed is None else consumed.digest(),
            dead_letter_bytes=self.dead_bytes,
            done=done,
            state_id=self.session.manifest.state_id,
        )

    def _misses(self) -> int:
        return self.misses_base + self.counts.misses

    def commit(self, materializer: Materializer) -> None:
        """A commit point: output flushed, then state + position made durable together."""
        if self.session is None:
            return
        self._flush_outputs()
        self.session.commit(self._position(done=False), materializer, self.shape.arity)

    def _flush_outputs(self) -> None:
        self.reporter.flush()
        if self.sink is not None:
            self.sink.flush()
        if self._dead_letter is not None:
            self._dead_letter.flush()

    def finish(self, materializer: Materializer, *, completed: bool) -> None:
        """Save at the end of the run: completed (the input is consumed) or stopped (resumable)."""
        if self.session is None:
            return
        self._flush_outputs()
        self.session.finish(self._position(done=completed), materializer, self.shape.arity)

    # -- the loop --------------------------------------------------------------------------

    def loop(self, materializer: Materializer, lines: Iterable[bytes], guard: _SignalGuard) -> int:
        """Process every line; return OK, BAD_INPUT or 128 + the signal's number.

        OSError propagates: raised while ``guard.busy`` it came from writing, else from reading.
        """
        assert self.sink is not None
        counts = self.counts
        process = materializer.process
        check = self.shape.check
        write = self.sink.write
        flush_each = self.interval is None or not self.input_regular
        flush = self.sink.flush
        progress = Progress(PREFIX, Progress.wanted(self.args.progress))
        fail = self.args.on_error == "fail"
        index = self.base
        interval = self.interval
        before = self.base - self.run_start  # lines of this input consumed by earlier processes
        compacting = isinstance(materializer, Compacting)  # ON CONFLICT DO ERROR | NOTHING
        if isinstance(materializer, Compacting):
            materializer.skip_conflicts = not fail
        for raw in lines:
            guard.busy = True
            number = before + counts.consumed + 1  # the line's number in this input
            try:
                item = parse_line(raw)
                if isinstance(item, ChangeLine):
                    change = item.change
                    check(change.row)
                    if self.need_ts and change.ts is None:
                        raise BadLine("event-time TTL needs a 'ts' on every change")
                    misses = materializer.retract_misses
                    emitted = process(change)
                    if emitted is not None:
                        data = format_change(index, emitted).encode("utf-8")
                        write(data)
                        if flush_each:
                            flush()
                        counts.emitted += 1
                        if self.out_bytes is not None:
                            self.out_bytes += len(data)
                    elif materializer.retract_misses != misses:
                        self._miss(number, index, change, materializer)
                elif item is not None:
                    if compacting:
                        self._watermark(materializer, item.time, index, number, raw, write, flush)
                    else:
                        materializer.advance_time(item.time)
                    self.now = max(self.now, item.time)
            except BadLine as error:
                if fail:
                    self._stopped(number, index, str(error))
                    return ExitCode.BAD_INPUT
                self._skip(number, index, str(error), raw)
            counts.consumed += 1
            index += 1
            if interval is not None and index % interval == 0:
                self.commit(materializer)
            progress.update(number, counts.emitted, counts.skipped)
            guard.busy = False
            if guard.received is not None:
                break
        if compacting and guard.received is None and self.session is None:
            # The end of the input is the final watermark (docs/cli.md); with --state-dir the
            # stream goes on in the next run, so nothing is compacted here.
            try:
                self._watermark(materializer, None, index, counts.consumed + 1, b"", write, flush)
            except BadLine as error:
                _say(f"at the end of the input (the final watermark): {error}")
                return ExitCode.BAD_INPUT
        progress.finish(counts.consumed, counts.emitted, counts.skipped)
        return ExitCode.OK if guard.received is None else 128 + guard.received

    def _watermark(
        self,
        materializer: Materializer,
        time: int | None,
        index: int,
        number: int,
        raw: bytes,
        write: Any,
        flush: Any,
    ) -> None:
        """ON CONFLICT DO ERROR | NOTHING: compact at a watermark (``time`` None: the end of the input),
        write what it emits with ``in`` = ``index``, dead-letter skipped conflicts.

        A conflict with --on-error fail is a BadLine (exit 1; the watermark changed nothing).
        """
        assert isinstance(materializer, Compacting)
        try:
            if time is None:
                emitted = materializer.finish()
            else:
                materializer.advance_time(time)
                emitted = materializer.take_emitted()
        except ConflictError as error:
            raise BadLine(str(error)) from None
        for change in emitted:
            data = format_change(index, change).encode("utf-8")
            write(data)
            self.counts.emitted += 1
            if self.out_bytes is not None:
                self.out_bytes += len(data)
        flush()
        conflicts, materializer.conflicts = materializer.conflicts, []
        for conflict in conflicts:
            self._skip(number, index, f"{conflict.describe()}; the current row is kept", raw)

    def _miss(self, number: int, index: int, change: Change, materializer: Materializer) -> None:
        self.counts.misses += 1
        described = self.reporter.explain(materializer, number, index, change)
        if not self.args.quiet and self.counts.misses <= SHOWN_MESSAGES:  # per run
            _say(f"line {number}: warning: {described}")

    def _stopped(self, number: int, index: int, error: str) -> None:
        _say(f"line {number}: {error}")
        where = ""
        if self.session is not None:
            where = (
                f"; state saved in {self.session.path}, its next line is in={index}: fix the line and run "
                "the same command again to go on from it"
            )
        _say(
            f"stopped at line {number} (lines count from 1, blank lines included); "
            f"the {number - 1} line(s) before it are processed{where}"
        )

    def _skip(self, number: int, index: int, error: str, raw: bytes) -> None:
        self.counts.skipped += 1
        try:
            if self._dead_letter is None:
                self._dead_letter = open(self.dead_letter_path, "ab")  # noqa: SIM115 - closed by close()
            data = format_dead_letter(number, index, error, raw).encode("utf-8")
            self._dead_letter.write(data)
            if self.interval is None:
                self._dead_letter.flush()
            self.dead_bytes = (self.dead_bytes or 0) + len(data)
        except OSError as failure:
            raise CliError(
                f"cannot write dead-letter file {self.dead_letter_path}: {failure.strerror or failure}; "
                "the state directory (if any) is left at its last commit",
                ExitCode.IO,
            ) from None
        if self.counts.skipped <= SHOWN_MESSAGES:
            _say(f"line {number}: {error} (skipped)")

    def summary(self) -> None:
        """Report skipped lines and misses beyond the ones shown."""
        counts = self.counts
        if counts.skipped:
            _say(f"skipped {counts.skipped} bad line(s); they are in {self.dead_letter_path}")
        if counts.misses and not self.args.quiet:
            for line in self.reporter.lines():
                _say(line)

    def close(self) -> None:
        """Close the dead-letter file if one was opened, and the misses file."""
        self.reporter.close()
        if self._dead_letter is not None:
            self._dead_letter.close()


def _miss_reporter(path: Path | None) -> MissReporter:
    try:
        return MissReporter(path)
    except OSError as error:
        raise CliError(f"cannot open --misses file {path}: {error.strerror}") from None


def _open_input(name: str) -> IO[bytes]:
    if name == "-":
        return sys.stdin.buffer
    try:
        return open(name, "rb")
    except OSError as error:
        raise CliError(f"cannot open input {name}: {error.strerror}") from None


def _open_output(name: str) -> IO[bytes]:
    if name == "-":
        sys.stdout.flush()
        return sys.stdout.buffer
    try:
        return open(name, "wb")
    except OSError as error:
        raise CliError(f"cannot open output {name}: {error.strerror}") from None


def _close_quietly(sink: IO[bytes], is_stdout: bool) -> None:
    """Close an output file, or after a failed write detach stdout; errors were reported already.

    Every emitted change is flushed when written, so a failure here can only repeat a write
    failure the loop reported. A broken stdout is pointed at /dev/null so the interpreter's
    final flush stays quiet.
    """
    try:
        if not is_stdout:
            sink.close()
        else:
            sink.flush()
    except OSError:
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)


def _damage_behind(materializer: Materializer, settings: Settings) -> CorruptStateError | None:
    """After an implementation raised on state read from a database: is the stored state
    damaged (a value of the wrong shape, a broken link) rather than the code wrong? Runs the
    layout's own ``_check()`` over the committed state (a full scan, only after a failure).
    None: the state looks sound (a bug)."""
    check = getattr(materializer, "_check", None)
    if check is None:
        return None
    try:
        check()
        # A well-shaped layout may still hold a value JSON cannot carry (a msgpack timestamp
        # extension inside a row): the stored rows must be JSON values.
        export = getattr(materializer, "export_elements", None)
        for context, elements in export() if export is not None else ():
            for row, _ in elements:
                if not all(is_json_value(value) for value in row):
                    raise ValueError(f"a row of key {context!r} holds a value JSON cannot carry")
    except Exception as error:  # a LayoutError, or the check itself tripping over a bad value
        return CorruptStateError(
            f"damaged state: the {settings.backend.value} state does not hold a valid "
            f"{settings.strategy.value} layout ({type(error).__name__}: {error})"
        )
    return None


def _reader_gone(sink: IO[bytes]) -> bool:
    """True if ``sink`` is a pipe whose reader has closed it with output still unread in the
    pipe: the run must not claim success (exit 141, as for a write that failed)."""
    try:
        descriptor = sink.fileno()
        if not stat.S_ISFIFO(os.fstat(descriptor).st_mode):
            return False
        poller = select.poll()
        poller.register(descriptor, 0)  # POLLERR is always reported
        if not any(events & select.POLLERR for _, events in poller.poll(0)):
            return False
        unread = struct.unpack("i", fcntl.ioctl(descriptor, termios.FIONREAD, b"\0\0\0\0"))[0]
        return bool(unread)  # a reader that read everything and then left lost nothing
    except (OSError, ValueError, io.UnsupportedOperation):
        return False


def _state_failure(error: StateError, state: StateSession | None) -> CliError | StateDirError:
    """A state error of a running run, with what it means and what to do (docs/operations.md)."""
    at = f"the state directory {state.path} is at its last commit" if state else "nothing was saved"
    if isinstance(error, CorruptStateError):
        return StateDirError(
            f"{error}; {at}. Restore the directory from a copy, or a savepoint into a new --state-dir"
        )
    if isinstance(error, StorageError):
        return CliError(
            f"{error}; {at}: free space (or fix the device) and run the same command again to go on",
            ExitCode.IO,
        )
    return StateDirError(f"{error}; {at}")


def _close_materializer(materializer: Materializer) -> None:
    """Close the state; a storage error now cannot lose what was committed: warn only."""
    try:
        materializer.close()
    except StateError as error:
        _say(f"warning: closing the state failed ({error}); everything committed is safe")


def _finish_after_error(job: _Run, materializer: Materializer) -> None:
    """Save a stopped run (interrupted, or its input failed) so the same command resumes it."""
    try:
        job.finish(materializer, completed=False)
    except OSError as error:
        raise CliError(
            f"cannot write output {job.args.output}: {error.strerror or error}; the state directory is "
            "left at its last commit",
            ExitCode.IO,
        ) from None


def run(args: argparse.Namespace) -> int:
    """Execute ``upsertmat replay`` for parsed arguments; return the exit code."""
    try:
        settings = settings_from_args(args)
        keys = Keys(pk=args.pk, upsert_key=args.upsert_key, equalizer=parse_equalizer(args.equalizer))
        RowShape(keys, args.arity)
    except (ConfigError, ValueError) as error:
        raise CliError(str(error)) from None
    if args.dead_letter is not None and args.on_error != "skip":
        raise CliError("--dead-letter is only used with --on-error skip")
    if args.dead_letter is not None and not Path(args.dead_letter).parent.is_dir():
        raise CliError(
            f"--dead-letter {args.dead_letter}: the directory {Path(args.dead_letter).parent} does not exist"
        )
    if args.state_dir is None:
        for flag, value in (
            ("--checkpoint-every", args.checkpoint_every),
            ("--stream-line", args.stream_line),
        ):
            if value is not None:
                raise CliError(f"{flag} needs --state-dir (without it nothing is committed)")
    if args.max_int_digits is not None:
        sys.set_int_max_str_digits(args.max_int_digits)
    with contextlib.ExitStack() as stack:
        state: StateSession | None = None
        if args.state_dir is not None:
            state = stack.enter_context(StateSession(Path(args.state_dir), keys, settings, args.arity))
            settings = state.settings
        job = _Run(args, settings, keys, state)
        stack.callback(job.close)
        materializer = create_materializer(keys, settings)
        stack.callback(_close_materializer, materializer)
        if state is not None:
            try:
                job.restore(materializer)
            except StateError as error:
                raise _state_failure(error, state) from None
        source = _open_input(args.input)
        if args.input != "-":
            stack.enter_context(source)
        job.input_regular = is_regular(source)
        if state is not None:
            rerun = job.plan(source)
            if rerun is not None:
                _say(rerun)
                return int(ExitCode.OK)
        lines = job.input if job.input is not None else source
        sink = job.open_output()
        stack.callback(_close_quietly, sink, args.output == "-")
        stack.enter_context(_library_warnings_silenced())
        guard = stack.enter_context(_SignalGuard())
        try:
            job.begin(materializer, sink)
            code = job.loop(materializer, lines, guard)
            guard.busy = True  # from here on an OSError comes from writing
            job.finish(materializer, completed=code == ExitCode.OK)
            sink.flush()
            if args.output == "-" and _reader_gone(sink):
                raise BrokenPipeError("stdout's reader went away")
        except KeyboardInterrupt:
            code = 128 + (guard.received or signal.SIGINT)
            _finish_after_error(job, materializer)
        except StateError as error:
            raise _state_failure(error, state) from None
        except (ArithmeticError, AssertionError, LookupError, TypeError, ValueError) as error:
            damage = (
                _damage_behind(materializer, settings) if state is not None and state.in_database else None
            )
            if damage is None:
                raise
            raise _state_failure(damage, state) from error
        except OSError as error:
            if guard.busy and isinstance(error, BrokenPipeError) and args.output == "-":
                # The reader went away (`replay ... | head`): exit quietly, as Unix tools do; the
                # state directory (if any) stays at its last commit.
                return 128 + signal.SIGPIPE
            if guard.busy:
                target = "stdout" if args.output == "-" else args.output
                raise CliError(
                    f"cannot write output {target}: {error.strerror or error}; the state directory (if any) "
                    "is left at its last commit: free the space (or fix the output) and run the same "
                    "command again to go on from there",
                    ExitCode.IO,
                ) from None
            _finish_after_error(job, materializer)
            raise CliError(f"cannot read input: {error.strerror or error}", ExitCode.IO) from None
        job.summary()
        if code >= 128:
            _say(
                f"interrupted after {job.counts.consumed} line(s); state saved: run the same command again "
                "to go on"
                if state
                else "interrupted"
            )
        return int(code)
    raise AssertionError("unreachable")  # pragma: no cover - ExitStack does not swallow
