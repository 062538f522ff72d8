"""``upsertmat replay``: run a JSON Lines changelog through a materializer (DESIGN sections 6, 7).

One input line at a time: parse it (:mod:`upsertmat.jsonl`), check its row's shape, feed it to
the materializer (or advance the clock), write and flush the emitted change. Per line the
cost is the materializer's plus O(length of the line). With ``--state-dir`` the state and the
count of consumed lines persist (:mod:`upsertmat.statedir`), so a stream split over several
runs produces, concatenated, exactly the output of one run.

What is saved when a run ends (with ``--state-dir``): at the end of the input, at a bad line
with ``--on-error fail`` (everything before that line), on SIGINT/SIGTERM (everything up to
the last fully processed line) and when reading the input fails. When writing the output
fails, or an implementation raises, nothing is saved: the state directory stays as it was
before the run, so re-running the run's input repeats changes rather than losing one (an
upsert sink that sees a repeated prefix ends in the same state).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import IO, Any

from .cliconfig import add_config_arguments, positive_int, settings_from_args
from .errors import CliError, ExitCode, StateDirError
from .impls import ConfigError, Settings, UnknownImplementation, create
from .impls.config import BACKEND, STRATEGY, TTL
from .impls.conflict import Compacting
from .impls.lifecycle import export_state, import_state, supports_transfer
from .impls.settings import Backend, TimeDomain
from .impls.state.errors import BackendUnavailableError, StateError
from .jsonl import BadLine, ChangeLine, RowShape, format_change, format_dead_letter, parse_line
from .progress import Progress
from .recovery import Position, PositionRecord, reopen_output, skip_lines
from .spec import Change, ConflictError, Keys, Materializer, equalizer_spec, parse_equalizer
from .statedir import DEAD_LETTER_NAME, Manifest, StateDir, ttl_from_record, ttl_record, ttl_text

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


def parse_columns(text: str) -> tuple[int, ...]:
    """``"0,2"`` -> ``(0, 2)``: comma-separated 0-based column indexes ("" -> ``()``)."""
    if not text.strip():
        return ()
    columns: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise argparse.ArgumentTypeError(
                f"expected comma-separated 0-based column indexes such as 0 or 0,2, got {text!r}"
            )
        if int(part) in columns:
            raise argparse.ArgumentTypeError(f"column {part} is named twice in {text!r}")
        columns.append(int(part))
    return tuple(columns)


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
        help="with --state-dir on heap: checkpoint state and position every N lines, so a killed "
        "run resumes from there (byte backends commit their position with every line)",
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
    """One invocation: owns the materializer, the streams and the counters."""

    def __init__(self, args: argparse.Namespace, settings: Settings, keys: Keys, state: StateDir | None):
        self.args = args
        self.settings = settings
        self.keys = keys
        self.state = state
        self.shape = RowShape(keys, args.arity)
        self.manifest: Manifest | None = None
        self.base = 0  # stream index of this run's first line (after lines skipped on resume)
        self.run_start = 0  # stream index of the first line of this run's input
        self.resuming = False  # the previous run on the state dir was killed; continue it
        self.skip = 0  # input lines already consumed by the killed run
        self.misses_base = 0  # rule-7 misses before this run
        self.out_bytes: int | None = None  # length of -o FILE (None for stdout)
        self.record: PositionRecord | None = None
        self.now = 0
        self.counts = _Counts()
        self.need_ts = settings.ttl.enabled and settings.ttl.time_domain is TimeDomain.EVENT_TIME
        self.dead_letter_path = self._dead_letter_path()
        self._dead_letter: IO[bytes] | None = None

    def _dead_letter_path(self) -> Path:
        if self.args.dead_letter is not None:
            return Path(self.args.dead_letter)
        if self.state is not None:
            return self.state.path / DEAD_LETTER_NAME
        return Path(DEFAULT_DEAD_LETTER)

    # -- state directory -------------------------------------------------------------------

    def _current_manifest(self) -> Manifest:
        equalizer = self.keys.equalizer
        return Manifest(
            pk=self.keys.pk,
            upsert_key=self.keys.upsert_key,
            strategy=self.settings.strategy.value,
            backend=self.settings.backend.value,
            equalizer=equalizer_spec(equalizer),
            equalizer_fingerprint=equalizer.fingerprint,
            arity=self.shape.arity,
            ttl=ttl_record(self.settings.ttl),
        )

    def open_state(self) -> None:
        """Load or create the manifest; refuse one that does not match this run."""
        assert self.state is not None
        wanted = self._current_manifest()
        found = self.state.load_manifest()
        if found is None:
            self.manifest = self.state.save(wanted, None)
            self.out_bytes = self._fresh_output_bytes()
            return
        where = f"(state in {self.state.manifest_path})"
        checks = (
            ("--pk", _columns(wanted.pk), _columns(found.pk)),
            ("--upsert-key", _columns(wanted.upsert_key) or "(none)", _columns(found.upsert_key) or "(none)"),
            (f"strategy ({STRATEGY})", wanted.strategy, found.strategy),
            (f"backend ({BACKEND})", wanted.backend, found.backend),
            (
                "--equalizer",
                f"{wanted.equalizer} ({wanted.equalizer_fingerprint})",
                f"{found.equalizer} ({found.equalizer_fingerprint})",
            ),
        )
        for what, ours, theirs in checks:
            if ours != theirs:
                raise StateDirError(
                    f"this run's {what} is {ours} but the state directory's is {theirs} {where}; "
                    "run with the same settings, or use another --state-dir"
                )
        if found.ttl is not None and found.ttl != wanted.ttl:
            raise StateDirError(
                f"this run's TTL ({TTL} and the ttl settings) is {ttl_text(self.settings.ttl)} but the "
                f"state directory's is {ttl_text(ttl_from_record(found.ttl))} {where}; stamps would change "
                "meaning: run with the same TTL settings, or migrate through a savepoint"
            )
        if wanted.arity is not None and found.arity is not None and wanted.arity != found.arity:
            raise StateDirError(
                f"this run's --arity is {wanted.arity} but the stream's arity is {found.arity} {where}"
            )
        if found.arity is not None:
            self.shape.arity = found.arity
        self.manifest = found if found.ttl is not None else replace(found, ttl=wanted.ttl)
        self.base = found.lines
        self.now = found.now
        self.misses_base = found.retract_misses
        self.resuming = found.in_progress
        self.run_start = found.run_start if found.in_progress else found.lines
        self.out_bytes = found.output_bytes if found.in_progress else self._fresh_output_bytes()

    def _fresh_output_bytes(self) -> int | None:
        return None if self.args.output == "-" else 0

    def restore(self, materializer: Materializer) -> None:
        """Load the heap snapshot (or the byte backend's position) and mark the run in progress.

        On a resume after a kill, ``skip`` becomes the number of this input's lines the killed
        run had already committed, and ``out_bytes`` the output length at that commit.
        """
        assert self.state is not None and self.manifest is not None
        if self.settings.backend is Backend.HEAP:
            if not supports_transfer(materializer):
                raise CliError(
                    f"{self.settings.strategy.value}/heap cannot export its state (no StateTransfer), "
                    "so it cannot be used with --state-dir"
                )
            import_state(materializer, self.state.load_snapshot(self.manifest, self.keys), self.now)
        else:
            self.record = PositionRecord.attach(materializer)
            if self.record is None:
                raise CliError(
                    f"{self.settings.strategy.value}/{self.settings.backend.value} cannot commit the "
                    "replay position with its state, so it cannot be used with --state-dir"
                )
            position = self.record.read() if self.resuming else None
            if position is not None and position.lines >= self.run_start:
                self.base, self.now, self.misses_base = position.lines, position.now, position.misses
                self.out_bytes = position.output_bytes
        if self.now:
            materializer.advance_time(self.now)
        if self.resuming:
            self.skip = self.base - self.run_start
        manifest = replace(self.manifest, in_progress=True, run_start=self.run_start, lines=self.base)
        self.manifest = self.state.save(manifest, None, keep_snapshot=True)
        if self.record is not None and not self.resuming:
            self.record.commit(self._position())

    def open_output(self, source: IO[bytes]) -> IO[bytes]:
        """Skip what a killed run consumed, and open the output (truncated to its checkpoint)."""
        name = self.args.output
        if not self.resuming:
            return _open_output(name)
        if skip_lines(source, self.skip) < self.skip:
            raise StateDirError(
                f"cannot resume the killed run on {self.state.path if self.state else ''}: its checkpoint is "
                f"{self.skip} line(s) into its input, but this input is shorter; resume with the same input"
            )
        _say(f"resuming the killed run from stream line in={self.base} ({self.skip} input line(s) skipped)")
        if name == "-":
            if self.skip:
                _say(
                    "stdout cannot be truncated: changes written after the checkpoint may repeat (same 'in')"
                )
            return _open_output(name)
        if self.out_bytes is None:
            self.out_bytes = 0
            return _open_output(name)
        return reopen_output(name, self.out_bytes)

    def _position(self) -> Position:
        return Position(self.base + self.counts.consumed, self.now, self._misses(), self.out_bytes)

    def _misses(self) -> int:
        return self.misses_base + self.counts.misses

    def save(self, materializer: Materializer) -> None:
        """Persist the state after ``counts.consumed`` lines of this run (if --state-dir)."""
        if self.state is None or self.manifest is None:
            return
        self._save(materializer, in_progress=False)

    def _save(self, materializer: Materializer, *, in_progress: bool) -> None:
        assert self.state is not None and self.manifest is not None
        histories = None
        if self.settings.backend is Backend.HEAP:
            histories = export_state(materializer)
        manifest = replace(
            self.manifest,
            arity=self.shape.arity,
            lines=self.base + self.counts.consumed,
            now=self.now,
            retract_misses=self._misses(),
            in_progress=in_progress,
            output_bytes=self.out_bytes if in_progress else None,
        )
        self.manifest = self.state.save(manifest, histories)

    def checkpoint(self, materializer: Materializer) -> None:
        """A heap checkpoint: snapshot + manifest with the position (the run stays in progress)."""
        self._save(materializer, in_progress=True)

    # -- the loop --------------------------------------------------------------------------

    def loop(
        self, materializer: Materializer, source: IO[bytes], sink: IO[bytes], guard: _SignalGuard
    ) -> int:
        """Process every line of ``source``; return OK, BAD_INPUT or 128 + the signal's number.

        OSError propagates: raised while ``guard.busy`` it came from writing, else from reading.
        """
        counts = self.counts
        process = materializer.process
        check = self.shape.check
        write, flush = sink.write, sink.flush
        progress = Progress(PREFIX, Progress.wanted(self.args.progress))
        fail = self.args.on_error == "fail"
        index = self.base
        record = self.record
        every = self.args.checkpoint_every if self.state is not None and record is None else None
        compacting = isinstance(materializer, Compacting)  # ON CONFLICT DO ERROR | NOTHING
        if isinstance(materializer, Compacting):
            materializer.skip_conflicts = not fail
        for raw in source:
            guard.busy = True
            number = counts.consumed + 1
            if record is not None:
                record.hold()
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
                        flush()
                        counts.emitted += 1
                        if self.out_bytes is not None:
                            self.out_bytes += len(data)
                    elif materializer.retract_misses != misses:
                        self._miss(number, change)
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
            counts.consumed = number
            index += 1
            if record is not None:
                record.commit(self._position())
            elif every is not None and number % every == 0:
                self.checkpoint(materializer)
            progress.update(number, counts.emitted, counts.skipped)
            guard.busy = False
            if guard.received is not None:
                break
        if compacting and guard.received is None and self.state is None:
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

    def _miss(self, number: int, change: Change) -> None:
        self.counts.misses += 1
        if not self.args.quiet and self.counts.misses <= SHOWN_MESSAGES:  # per run
            _say(
                f"line {number}: warning: {change.kind.value} {_row_text(change)} matched no stored row "
                "(rule 7: nothing emitted)"
            )

    def _stopped(self, number: int, index: int, error: str) -> None:
        _say(f"line {number}: {error}")
        where = ""
        if self.state is not None:
            where = f"; state saved in {self.state.path}, its next line is in={index}"
        _say(
            f"stopped at line {number} (lines count from 1, blank lines included); "
            f"the {number - 1} line(s) before it are processed{where}"
        )

    def _skip(self, number: int, index: int, error: str, raw: bytes) -> None:
        self.counts.skipped += 1
        try:
            if self._dead_letter is None:
                self.dead_letter_path.parent.mkdir(parents=True, exist_ok=True)
                self._dead_letter = open(self.dead_letter_path, "ab")  # noqa: SIM115 - closed by close()
            self._dead_letter.write(format_dead_letter(number, index, error, raw).encode("utf-8"))
            self._dead_letter.flush()
        except OSError as failure:
            raise CliError(
                f"cannot write dead-letter file {self.dead_letter_path}: {failure.strerror or failure}; "
                "the state directory (if any) is left as it was before this run",
                ExitCode.IO,
            ) from None
        if self.counts.skipped <= SHOWN_MESSAGES:
            _say(f"line {number}: {error} (skipped)")

    def summary(self) -> None:
        """Report skipped lines and misses beyond the ones shown."""
        counts = self.counts
        if counts.skipped:
            _say(f"skipped {counts.skipped} bad line(s); they are in {self.dead_letter_path}")
        if counts.misses > SHOWN_MESSAGES and not self.args.quiet:
            _say(f"{counts.misses} retraction(s) matched no stored row in all")

    def close(self) -> None:
        """Close the dead-letter file if one was opened."""
        if self._dead_letter is not None:
            self._dead_letter.close()


def _columns(columns: tuple[int, ...]) -> str:
    return ",".join(str(column) for column in columns)


def _row_text(change: Change) -> str:
    return json.dumps(list(change.row), ensure_ascii=False)


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


def _create(keys: Keys, settings: Settings) -> Materializer:
    try:
        return create(keys, settings)
    except (ConfigError, UnknownImplementation, BackendUnavailableError) as error:
        raise CliError(str(error)) from None
    except StateError as error:  # locked or damaged backend state under --state-dir
        raise StateDirError(str(error)) from None
    except ImportError as error:
        name = f"{settings.strategy.value}/{settings.backend.value}"
        raise CliError(f"{name} needs {error.name or error}, which is not installed") from None


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
    with contextlib.ExitStack() as stack:
        state = stack.enter_context(StateDir(args.state_dir)) if args.state_dir is not None else None
        if state is not None and settings.backend is not Backend.HEAP:
            settings = replace(settings, state_dir=state.path)
        job = _Run(args, settings, keys, state)
        stack.callback(job.close)
        if state is not None:
            job.open_state()
        materializer = _create(keys, settings)
        stack.callback(materializer.close)
        if state is not None:
            job.restore(materializer)
        source = _open_input(args.input)
        if args.input != "-":
            stack.enter_context(source)
        sink = job.open_output(source)
        stack.callback(_close_quietly, sink, args.output == "-")
        stack.enter_context(_library_warnings_silenced())
        guard = stack.enter_context(_SignalGuard())
        try:
            code = job.loop(materializer, source, sink, guard)
        except KeyboardInterrupt:
            code = 128 + (guard.received or signal.SIGINT)
        except OSError as error:
            if guard.busy and isinstance(error, BrokenPipeError) and args.output == "-" and state is None:
                # The reader went away (`replay ... | head`): exit quietly, as Unix tools do.
                return 128 + signal.SIGPIPE
            if guard.busy:
                raise CliError(
                    f"cannot write output: {error.strerror or error}; the state directory (if any) "
                    "is left as it was before this run",
                    ExitCode.IO,
                ) from None
            job.save(materializer)
            raise CliError(f"cannot read input: {error.strerror or error}", ExitCode.IO) from None
        job.save(materializer)
        job.summary()
        if code >= 128:
            _say(f"interrupted after {job.counts.consumed} line(s); state saved" if state else "interrupted")
        return int(code)
    raise AssertionError("unreachable")  # pragma: no cover - ExitStack does not swallow
