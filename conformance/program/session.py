"""One long-running program process fed stream after stream on disjoint sink keys.

A program under test may take seconds to start (a JVM), and Hypothesis runs a check per
example and per shrink step. A :class:`Session` starts the program once per (keys, settings,
arity) and feeds each stream to the same process: the first sink-key column of stream ``n``
is rewritten to ``"n|<JSON of the value>"`` and a timed stream's clock is shifted past the
session's (:class:`.checks.Batch`), so streams never meet. After each stream one *sentinel*
insert on a fresh key follows; it must emit ``+I``, and because outputs come in input order,
its output proves every output of the stream has arrived (this needs the program to flush
its output after every input line, as ``upsertmat replay`` does). So every stream — every
Hypothesis example and shrink step — costs a few pipe writes, not a process start, and a
failure is reported for its own stream and shrunk as usual.

A crash, a timeout or a protocol error ends the session (the next stream starts a new one).
Sessions are restarted after :data:`MAX_STREAMS` streams (state grows) and closed at the end
of the pytest run (:func:`close_all`). Cost per stream: O(its inputs + outputs) bytes.
"""

from __future__ import annotations

import json
import queue
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from contextlib import ExitStack
from typing import IO

from ...spec import Change, Granularity, JsonValue, Keys, RowKind, TtlSettings
from ..generators import Advance, Step
from ..protocol import Output, Program, ProtocolError, decode_output, encode_step, state_directory, ttl_flags
from .checks import SHIFT_GAP, Batch, compare, model_outputs

MAX_STREAMS = 2000
"""Streams fed to one process before it is replaced by a fresh one."""


class Session:
    """A running program under test; :meth:`feed` one stream at a time."""

    def __init__(self, program: Program, keys: Keys, settings: dict[str, str], arity: int) -> None:
        self.program = program
        self.keys = keys
        self.arity = arity
        self.streams = 0
        self.clock = 0
        self.next_index = 0
        self.timed = bool(settings)
        self._resources = ExitStack()
        state = self._resources.enter_context(state_directory()) if program.stateful else None
        self.argv = program.argv(keys, settings, state)
        self._stderr: IO[bytes] = self._resources.enter_context(tempfile.TemporaryFile())  # noqa: SIM115
        try:
            self._process = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
            )
        except FileNotFoundError as error:
            self._resources.close()
            raise ProtocolError(f"cannot start {self.argv[0]!r}: {error.strerror}") from None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        return "\n".join(f"  {line}" for line in lines[-15:])

    def _fail(self, what: str) -> ProtocolError:
        self._process.kill()
        self._process.wait()
        stderr = self._stderr_tail()
        self.close()
        return ProtocolError(
            f"{what}\nprogram: {' '.join(self.argv)} (one session, {self.streams} stream(s) fed)\n"
            f"stderr:\n{stderr}"
        )

    def sentinel(self) -> Change:
        """An insert on a key no stream uses; it must emit ``+I`` of itself.

        With TTL it carries a ``ts`` ahead of the clock (event time needs one on every change;
        ahead, it is not expired on arrival).
        """
        row: list[JsonValue] = [None] * self.arity
        for column in self.keys.pk:
            row[column] = f"sentinel|{self.streams}"
        return Change(RowKind.INSERT, tuple(row), self.clock + SHIFT_GAP if self.timed else None)

    def feed(self, steps: Sequence[Step]) -> list[Output]:
        """Feed ``steps`` and the sentinel; the stream's outputs, ``in`` relative to its start."""
        start = self.next_index
        closing = self.sentinel()
        text = "".join(encode_step(step) + "\n" for step in (*steps, closing))
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(text.encode())
            self._process.stdin.flush()
        except OSError as error:
            raise self._fail(f"the program stopped reading its input ({error})") from None
        self.next_index += len(steps) + 1
        self.streams += 1
        done = start + len(steps)
        outputs: list[Output] = []
        while True:
            try:
                line = self._lines.get(timeout=self.program.timeout)
            except queue.Empty:
                raise self._fail(
                    f"no output for the sentinel line (in={done}) within {self.program.timeout:g} s: "
                    "does the program flush its output after every input line?"
                ) from None
            if line is None:
                code = self._process.wait()
                raise self._fail(f"the program exited with {code} before answering input {done}")
            if not line.strip():
                continue
            output = decode_output(line.decode("utf-8"), len(outputs) + 1)
            if output.index == done:
                if output.op != "+I" or json.dumps(list(output.row)) != json.dumps(list(closing.row)):
                    raise self._fail(
                        f"the sentinel {closing!r} (in={done}) must emit +I of itself, got {output!r}"
                    )
                return outputs
            if not start <= output.index < done or (outputs and output.index < outputs[-1].index + start):
                raise self._fail(
                    f"output {output!r} names input {output.index}; this stream is {start}..{done - 1}"
                )
            outputs.append(Output(output.index - start, output.op, output.row))

    def close(self) -> None:
        """End the input and wait for the process (killed if it does not stop)."""
        if self._process.poll() is None:
            try:
                assert self._process.stdin is not None
                self._process.stdin.close()
                self._process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._resources.close()


_SESSIONS: dict[tuple[str, Keys, tuple[tuple[str, str], ...], int], Session] = {}


def session_for(program: Program, keys: Keys, settings: dict[str, str], arity: int) -> Session:
    """The running session for these keys, settings and arity (started on first use)."""
    key = (program.command, keys, tuple(sorted(settings.items())), arity)
    session = _SESSIONS.get(key)
    if session is not None and (session._process.poll() is not None or session.streams >= MAX_STREAMS):
        session.close()
        session = None
    if session is None:
        session = _SESSIONS[key] = Session(program, keys, settings, arity)
    return session


def close_all() -> None:
    """Close every session (the plugin calls this when pytest ends)."""
    while _SESSIONS:
        _, session = _SESSIONS.popitem()
        session.close()


def check_in_session(
    program: Program,
    keys: Keys,
    label: str,
    steps: Sequence[Step],
    *,
    ttl: TtlSettings | None = None,
    granularity: Granularity = Granularity.PER_ELEMENT,
    what: str = "generated streams",
    written: Sequence[Change | None] | None = None,
) -> None:
    """Feed one stream to the session and compare every input's outputs with the model's, or
    (``written``: a scenario's hand-written output per input) with those, keys rewritten alike."""
    __tracebackhide__ = True
    changes = [step for step in steps if isinstance(step, Change)]
    if not changes:
        return
    arity = len(changes[0].row)
    session = session_for(program, keys, ttl_flags(ttl), arity)
    timed = any(isinstance(step, Advance) or step.ts is not None for step in steps)
    batch = Batch.of(keys, [(label, steps)], timed, first=session.streams, clock=session.clock, rewrite=True)
    session.clock = max(session.clock, batch.clock)
    if written is None:
        expected = model_outputs(keys, batch.steps, ttl, granularity)
    else:
        expected = [[] for _ in batch.steps]
        for index, (_, position) in enumerate(batch.origin):
            change = written[position] if position is not None else None
            if change is not None:
                expected[index] = [Output(index, change.kind.value, batch.rewrite(0, change.row))]
    try:
        actual = session.feed(batch.steps)  # a failed session is replaced by the next session_for
    except ProtocolError as error:
        raise error.fed(keys, batch.steps, ttl_flags(ttl)) from None
    compare(batch, expected, actual, program.command, what, ttl, granularity)
