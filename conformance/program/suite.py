"""The suite's tests for a program under test (``MaterializerTests.command``, ``--upsertmat-cmd``).

:class:`ProgramSuite` is what each ``MaterializerTests`` test calls when a command is set. What
runs, with the same catalogues and generators as for a Python implementation:

- scenarios and TTL scenarios: one run each (exact keys, no rewriting);
- pinned streams: one run;
- generated streams (valid, bare, tolerated, long, timed under each TTL configuration): lists
  of up to ``batch`` streams per run (:mod:`.checks`), so a slow-starting program is
  started a bounded number of times; the example count is the in-process one divided by
  ``batch / 4`` (at least 1), about the same number of streams in all;
- lifecycle: split runs over ``{STATE}`` (TTL off or one of the six configurations);
- the step-by-step state machines are skipped: a process cannot be queried between inputs.

A setting or ``--state-dir`` the program refuses (exit 2) skips the tests that need it, with the
program's message as the reason. Support is probed once per command and setting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pytest
from hypothesis import strategies as st

from ...spec import CanonicalEqualizer, Granularity, Keys, TtlSettings, insert
from ..generators import GeneratedStream, Step, TimedStream, bare_update_streams, timed_streams, valid_streams
from ..pinned import ttl_probe
from ..protocol import Program, Unsupported, state_directory, ttl_flags
from .checks import check_program_scenario, check_program_streams
from .session import check_in_session

T = TypeVar("T")

STATE_MACHINE_SKIP = (
    "the step-by-step state machine needs an in-process implementation (a program cannot be "
    "queried between inputs); for a program the same rules run as generated multi-key streams "
    "and split runs (test_lifecycle_state_machine)"
)
_PROBES: dict[tuple[str, str], str | None] = {}
"""(command, what) -> None when supported, else the reason to skip."""

RunProperty = Callable[..., None]


def _probe(program: Program, what: str, ttl: TtlSettings | None, state: bool) -> str | None:
    key = (program.command, what)
    if key not in _PROBES:
        keys = Keys(pk=(0,))
        steps: list[Step] = [insert(1, "probe", ts=0)]
        try:
            if state:
                with state_directory() as path:
                    program.run(keys, steps, ttl_flags(ttl), path)
            else:
                program.run(keys, steps, ttl_flags(ttl))
            _PROBES[key] = None
        except Unsupported as refused:
            _PROBES[key] = str(refused)
    return _PROBES[key]


@dataclass(frozen=True)
class ProgramSuite:
    """The program-mode tests of one ``MaterializerTests`` class."""

    program: Program
    name: str
    batch: int
    granularity: Granularity
    run_property: RunProperty
    scale: float
    scenarios_in_session: bool = False

    def _require(self, ttl: TtlSettings | None = None, state: bool = False) -> None:
        if state and not self.program.stateful:
            pytest.skip("split runs need a {STATE} placeholder in the command (e.g. --state-dir {STATE})")
        what = f"ttl={ttl_flags(ttl)} state={state}"
        reason = _probe(self.program, what, ttl, state)
        if reason is not None:
            pytest.skip(reason)

    def _weight(self, weight: float) -> float:
        return weight / max(1.0, self.batch / 4)

    def scenario(
        self,
        keys: Keys,
        name: str,
        steps: Sequence[Step],
        expected: Sequence[object],
        ttl: TtlSettings | None = None,
    ) -> None:
        """One catalogue scenario in one run."""
        __tracebackhide__ = True
        if not isinstance(keys.equalizer, CanonicalEqualizer):
            pytest.skip("the process protocol passes no equalizer; this scenario uses another one")
        if ttl is not None:
            self._require(ttl)
        if self.scenarios_in_session:
            check_in_session(
                self.program, keys, f"scenario {name!r}", steps, ttl=ttl, written=expected,  # type: ignore[arg-type]
                what=f"scenario {name!r}",
            )  # fmt: skip
            return
        check_program_scenario(self.program, keys, name, steps, expected, ttl)  # type: ignore[arg-type]

    def pinned(self, streams: Sequence[GeneratedStream]) -> None:
        """Pinned streams, one after the other in the running program."""
        __tracebackhide__ = True
        for stream in streams:
            check_in_session(self.program, stream.keys, repr(stream), stream.arrival, what="pinned streams")

    def streams(self, test: str, strategy: st.SearchStrategy[GeneratedStream], weight: float) -> None:
        """A Hypothesis property over generated streams, each fed to the running program."""
        __tracebackhide__ = True

        def check(stream: GeneratedStream) -> None:
            check_in_session(self.program, stream.keys, repr(stream), stream.arrival, what=test)

        self.run_property(f"{self.name}.program.{test}", strategy, check, weight=weight, scale=self.scale)

    def ttl_streams(self, ttl: TtlSettings, weight: float) -> None:
        """Timed streams under ``ttl``, each fed to the running program (clocks shifted apart)."""
        __tracebackhide__ = True
        self._require(ttl)

        def check(stream: TimedStream) -> None:
            check_in_session(
                self.program,
                stream.keys,
                repr(stream),
                stream.steps,
                ttl=ttl,
                granularity=self.granularity,
                what=f"timed streams under {ttl_flags(ttl)}",
            )

        self.run_property(
            f"{self.name}.program.ttl_{ttl.time_domain.value}_{ttl.update_type.value}",
            timed_streams(),
            check,
            weight=weight,
            scale=self.scale,
            examples=(ttl_probe(ttl),),
        )

    def split_runs(self, ttl_configs: Sequence[TtlSettings], weight: float) -> None:
        """Streams fed over 1-4 runs of one state directory (TTL off or one of ``ttl_configs``)."""
        __tracebackhide__ = True
        self._require(state=True)
        supported = [
            ttl
            for ttl in ttl_configs
            if _probe(self.program, f"ttl={ttl_flags(ttl)} state=True", ttl, True) is None
        ]
        choices: list[TtlSettings | None] = [None, *supported]

        @st.composite
        def case(
            draw: st.DrawFn,
        ) -> tuple[TtlSettings | None, list[tuple[Keys, str, tuple[Step, ...]]], list[int]]:
            ttl = draw(st.sampled_from(choices))
            if ttl is None:
                plain = draw(
                    st.lists(
                        st.one_of(valid_streams(), bare_update_streams()), min_size=1, max_size=self.batch
                    )
                )
                streams: list[tuple[Keys, str, tuple[Step, ...]]] = [
                    (s.keys, repr(s), s.arrival) for s in plain
                ]
            else:
                timed = draw(st.lists(timed_streams(), min_size=1, max_size=self.batch))
                streams = [(s.keys, repr(s), s.steps) for s in timed]
            cuts = draw(st.lists(st.integers(0, 10**6), min_size=1, max_size=3))
            return ttl, streams, cuts

        def check(
            value: tuple[TtlSettings | None, list[tuple[Keys, str, tuple[Step, ...]]], list[int]],
        ) -> None:
            ttl, streams, cuts = value
            check_program_streams(
                self.program,
                streams,
                ttl=ttl,
                granularity=self.granularity,
                what=f"split runs at {sorted(cuts)} (mod length + 1), TTL {ttl_flags(ttl) or 'off'}",
                cut=lambda n: [c % (n + 1) for c in cuts],
            )

        self.run_property(
            f"{self.name}.program.split_runs", case(), check, weight=self._weight(weight), scale=self.scale
        )
