"""The process protocol: run a program under test on JSON Lines, as ``upsertmat replay`` speaks it.

The contract (docs/conformance.md, "Any program under test"):

- **Command line.** The command given (split like a shell does, with :func:`shlex.split`) plus
  ``--pk COLS`` (comma-separated 0-based columns), ``--upsert-key COLS`` when the keys have an
  upsert key (absent otherwise), and ``--set KEY=VALUE`` per setting (TTL only:
  ``table.exec.state.ttl``, ``upsertmat.state.ttl.time-domain``,
  ``upsertmat.state.ttl.update-type``). A ``{STATE}`` in the command is replaced by a state
  directory path that does not exist before the first run of a stream, and a ``{FIRST_LINE}``
  by the stream index (``in``) of the run's first input line (0 for the first run of a stream;
  ``upsertmat replay`` takes it as ``--stream-line {FIRST_LINE}``, its explicit position for stdin).
- **stdin**: one JSON object per line, UTF-8: a change ``{"op": "+I", "row": [...], "ts": 17}``
  (``op`` one of ``+I -U +U -D``; ``ts`` only when the change has one) or a clock advance
  ``{"time": T}``. Rows are JSON arrays; ``1``, ``1.0`` and ``true`` are different values.
- **stdout**: one ``{"in": N, "op": "+I"|"+U"|"-D", "row": [...]}`` per emitted change, in
  order; ``in`` is the 0-based index of the input line that caused it, counted over every run
  of one state directory (``in`` continues across split runs). Exit code 0 when the input ends.
- **Exit code 2** on a run that passed ``--set`` or ``--state-dir`` means "unsupported": the
  tests needing it are skipped with the program's last stderr line as the reason. Any other
  failure (another exit code, a malformed output line) fails the test.

Cost: one process per :meth:`Program.run`; O(input + output) bytes through pipes.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..spec import Change, JsonValue, Keys, TimeDomain, TtlSettings, canonical
from ..spec import Unsupported as NotSupported
from .generators import Advance, Step

STATE_PLACEHOLDER = "{STATE}"
FIRST_LINE_PLACEHOLDER = "{FIRST_LINE}"
UNSUPPORTED_EXIT = 2
OUTPUT_KINDS = frozenset({"+I", "+U", "-D"})


class Unsupported(NotSupported):
    """The program refused a setting or ``--state-dir`` (exit code 2): skip, do not fail."""


class ProtocolError(AssertionError):
    """The program broke the protocol: a crash, a bad exit code or a malformed output line.

    ``keys``, ``steps`` and ``settings``, when known, are what the failing run was fed (the
    conformance report turns them into a reproduction).
    """

    def __init__(
        self,
        message: str,
        *,
        keys: Keys | None = None,
        steps: Sequence[Step] = (),
        settings: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.keys = keys
        self.steps = tuple(steps)
        self.settings = dict(settings or {})

    def fed(self, keys: Keys, steps: Sequence[Step], settings: Mapping[str, str]) -> ProtocolError:
        """Record what the failing run was fed (unless recorded already); returns itself."""
        if self.keys is None:
            self.keys, self.steps, self.settings = keys, tuple(steps), dict(settings)
        return self


@dataclass(frozen=True)
class Output:
    """One output line: the input index it names, its op and its row (exact JSON values)."""

    index: int
    op: str
    row: tuple[JsonValue, ...]

    def exact(self) -> tuple[int, str, bytes]:
        """What comparisons use: index, op and the canonical (type-exact) row."""
        return (self.index, self.op, canonical(self.row))

    def __repr__(self) -> str:
        return f"{self.op}{json.dumps(list(self.row), ensure_ascii=False)}"


def ttl_flags(ttl: TtlSettings | None) -> dict[str, str]:
    """The ``--set`` settings of a TTL configuration (empty when TTL is off)."""
    if ttl is None or not ttl.ttl_ms:
        return {}
    return {
        "table.exec.state.ttl": str(ttl.ttl_ms),
        "upsertmat.state.ttl.time-domain": ttl.time_domain.value,
        "upsertmat.state.ttl.update-type": ttl.update_type.value,
    }


def encode_step(step: Step) -> str:
    """One input line (without its newline)."""
    if isinstance(step, Advance):
        return json.dumps({"time": step.time})
    line: dict[str, object] = {"op": step.kind.value, "row": list(step.row)}
    if step.ts is not None:
        line["ts"] = step.ts
    return json.dumps(line, ensure_ascii=False, allow_nan=False)


def decode_output(text: str, number: int) -> Output:
    """Parse output line ``number`` (1-based); ProtocolError naming what is wrong."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ProtocolError(f"output line {number} is not JSON ({error}): {text!r}") from None
    if (
        not isinstance(value, dict)
        or set(value) != {"in", "op", "row"}
        or type(value["in"]) is not int
        or value["op"] not in OUTPUT_KINDS
        or not isinstance(value["row"], list)
    ):
        raise ProtocolError(
            f'output line {number} is not {{"in": N, "op": "+I"|"+U"|"-D", "row": [...]}}: {text!r}'
        )
    return Output(value["in"], value["op"], tuple(value["row"]))


@dataclass(frozen=True)
class Program:
    """A program under test: a command line speaking the protocol above."""

    command: str
    timeout: float = 600.0

    @property
    def stateful(self) -> bool:
        """True when the command has a ``{STATE}`` placeholder (split runs are possible)."""
        return STATE_PLACEHOLDER in self.command

    def argv(
        self, keys: Keys, settings: Mapping[str, str], state: Path | None, first_index: int = 0
    ) -> list[str]:
        """The command line of one run."""
        words = [
            word.replace(STATE_PLACEHOLDER, str(state)) if state is not None else word
            for word in shlex.split(self.command)
        ]
        words = [word.replace(FIRST_LINE_PLACEHOLDER, str(first_index)) for word in words]
        words += ["--pk", ",".join(map(str, keys.pk))]
        if keys.upsert_key:
            words += ["--upsert-key", ",".join(map(str, keys.upsert_key))]
        for key, value in settings.items():
            words += ["--set", f"{key}={value}"]
        return words

    def run(
        self,
        keys: Keys,
        steps: Sequence[Step],
        settings: Mapping[str, str] | None = None,
        state: Path | None = None,
        first_index: int = 0,
    ) -> list[Output]:
        """Feed ``steps``; the outputs, checked to name inputs ``first_index..`` in order.

        ``state`` replaces ``{STATE}`` (a fresh directory when None). Raises
        :class:`Unsupported` (exit 2 with settings or a state directory) or :class:`ProtocolError`.
        """
        if state is None and self.stateful:
            with state_directory() as fresh:
                return self.run(keys, steps, settings, fresh, first_index)
        settings = dict(settings or {})
        try:
            return self._run(keys, steps, settings, state, first_index)
        except ProtocolError as error:
            raise error.fed(keys, steps, settings) from None

    def _run(
        self,
        keys: Keys,
        steps: Sequence[Step],
        settings: dict[str, str],
        state: Path | None,
        first_index: int,
    ) -> list[Output]:
        argv = self.argv(keys, settings, state, first_index)
        text = "".join(encode_step(step) + "\n" for step in steps)
        try:
            done = subprocess.run(
                argv, input=text.encode(), capture_output=True, timeout=self.timeout, check=False
            )
        except FileNotFoundError as error:
            raise ProtocolError(f"cannot start {argv[0]!r}: {error.strerror}") from None
        except subprocess.TimeoutExpired:
            raise ProtocolError(f"{shlex.join(argv)} did not finish within {self.timeout:g} s") from None
        stderr = done.stderr.decode("utf-8", "replace").strip().splitlines()
        if done.returncode == UNSUPPORTED_EXIT and (settings or (state is not None and self.stateful)):
            reason = stderr[-1] if stderr else "(no message)"
            raise Unsupported(
                f"the program refused {shlex.join(argv[len(shlex.split(self.command)) :])}: {reason}"
            )
        if done.returncode != 0:
            tail = "\n".join(f"  {line}" for line in stderr[-15:])
            raise ProtocolError(
                f"{shlex.join(argv)} exited with {done.returncode} on {len(steps)} input line(s); "
                f"stderr:\n{tail}"
            )
        outputs = [
            decode_output(line, number)
            for number, line in enumerate(done.stdout.decode("utf-8").splitlines(), 1)
            if line.strip()
        ]
        last = first_index - 1
        for output in outputs:
            if not last <= output.index < first_index + len(steps):
                raise ProtocolError(
                    f'output {output!r} names input {output.index} ("in"), but this run fed inputs '
                    f"{first_index}..{first_index + len(steps) - 1} and outputs must come in input order"
                )
            last = output.index
        return outputs


@contextmanager
def state_directory() -> Iterator[Path]:
    """A path for ``{STATE}`` that does not exist yet, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="upsertmat-state-") as parent:
        yield Path(parent) / "state"


def by_input(outputs: Iterable[Output]) -> dict[int, list[Output]]:
    """Outputs grouped by the input index they name."""
    grouped: dict[int, list[Output]] = {}
    for output in outputs:
        grouped.setdefault(output.index, []).append(output)
    return grouped


def needs_timestamps(ttl: TtlSettings | None) -> bool:
    """True when every change must carry a ``ts`` (event-time TTL)."""
    return ttl is not None and bool(ttl.ttl_ms) and ttl.time_domain is TimeDomain.EVENT_TIME


def as_output(change: Change | None, index: int) -> list[Output]:
    """The model's output for input ``index`` in protocol form (0 or 1 element)."""
    return [] if change is None else [Output(index, change.kind.value, tuple(change.row))]
