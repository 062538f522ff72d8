"""The suite against programs (``--upsertmat-cmd``): the protocol, batching, and whole runs.

``upsertmat replay`` itself must pass the whole suite through the process protocol; a buggy
program must be caught with its own minimal stream; a program that refuses TTL settings or has
no ``{STATE}`` placeholder gets those tests skipped with a reason.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from upsertmat.conformance.generators import KEYS_WITH_UPSERT_KEY, KEYS_WITHOUT_UPSERT_KEY, Advance, Step
from upsertmat.conformance.program.checks import Batch, check_program_streams, model_outputs
from upsertmat.conformance.program.session import check_in_session, close_all, session_for
from upsertmat.conformance.protocol import Output, Program, ProtocolError, decode_output, encode_step
from upsertmat.conformance.scenarios import SCENARIOS, TTL_SCENARIOS
from upsertmat.conformance.suite import TTL_CONFIGS
from upsertmat.spec import Granularity, Keys, TimeDomain, TtlSettings, UpdateType, delete, insert

PYTHON = shlex.quote(sys.executable)
REPLAY = f"{PYTHON} -m upsertmat replay"

# pinned, valid, bare, tolerated, long, state machine, lifecycle, TTL machine
SUITE_TESTS = len(SCENARIOS) + len(TTL_SCENARIOS) + len(TTL_CONFIGS) + 8
PER_ELEMENT_TTL = sum(s.granularity is Granularity.PER_ELEMENT for s in TTL_SCENARIOS)

# A program written from scratch on the protocol (no upsertmat import, so it starts fast):
# LEGACY's rules, one list of rows per sink key, with a bug when BUG=1: a retraction of the
# last of several rows emits -D instead of +U of the new last row.
PROGRAM = r"""
import argparse, json, sys

BUG = {bug}
parser = argparse.ArgumentParser()
parser.add_argument("--pk", required=True)
parser.add_argument("--upsert-key", default="")
parser.add_argument("--set", action="append", default=[])
args = parser.parse_args()
if args.set:
    print("this program supports no settings (no TTL): " + " ".join(args.set), file=sys.stderr)
    sys.exit(2)
pk = [int(c) for c in args.pk.split(",")]
uk = [int(c) for c in args.upsert_key.split(",") if c]
state = {{}}


def key(row, columns):
    return json.dumps([row[c] for c in columns])  # 1, 1.0 and true stay apart


def emit(index, op, row):
    print(json.dumps({{"in": index, "op": op, "row": row}}), flush=True)


for index, line in enumerate(sys.stdin):
    value = json.loads(line)
    if "time" in value:
        continue
    op, row = value["op"], value["row"]
    rows = state.setdefault(key(row, pk), [])
    match = key(row, uk) if uk else json.dumps(row)
    found = next((i for i, r in enumerate(rows) if (key(r, uk) if uk else json.dumps(r)) == match), -1)
    if op in ("+I", "+U"):
        emit(index, "+U" if rows else "+I", row)
        if uk and found >= 0:
            rows[found] = row
        else:
            rows.append(row)
    elif found >= 0:
        last = found == len(rows) - 1
        del rows[found]
        if not rows:
            emit(index, "-D", row)
        elif last:
            emit(index, "-D" if BUG else "+U", rows[-1])
"""


def write_program(directory: Path, bug: bool) -> str:
    path = directory / ("buggy.py" if bug else "correct.py")
    path.write_text(PROGRAM.format(bug=int(bug)), encoding="utf-8")
    return f"{PYTHON} {shlex.quote(str(path))}"


# -- the protocol -----------------------------------------------------------------------------


def test_input_lines_keep_json_types_and_timestamps() -> None:
    assert encode_step(insert(1, 1.0, True, None, "é")) == '{"op": "+I", "row": [1, 1.0, true, null, "é"]}'
    assert encode_step(delete(1, ts=7)) == '{"op": "-D", "row": [1], "ts": 7}'
    assert encode_step(Advance(12)) == '{"time": 12}'


@pytest.mark.parametrize(
    "line",
    [
        "nope",
        "[1]",
        '{"in": 0, "op": "-U", "row": [1]}',
        '{"in": "0", "op": "+I", "row": [1]}',
        '{"in": 0, "op": "+I"}',
    ],
)
def test_malformed_output_lines_break_the_protocol(line: str) -> None:
    with pytest.raises(ProtocolError, match="output line 3"):
        decode_output(line, 3)


def test_command_line_of_a_run() -> None:
    program = Program("my-engine --state-dir {STATE} --fast")
    argv = program.argv(Keys((0, 2), (1,)), {"table.exec.state.ttl": "5"}, Path("/tmp/s"))
    assert argv == [
        "my-engine", "--state-dir", "/tmp/s", "--fast", "--pk", "0,2", "--upsert-key", "1",
        "--set", "table.exec.state.ttl=5",
    ]  # fmt: skip
    assert Program("engine").argv(Keys((0,)), {}, None) == ["engine", "--pk", "0"]


def test_a_batch_puts_streams_on_disjoint_keys_and_apart_in_time() -> None:
    first = (insert(1, "u1", 10, "a", ts=0), Advance(3), delete(1, "u1", 10, "a", ts=3))
    second = (insert(1, "u1", 10, "a", ts=1), insert(1.0, "u2", 10, "b", ts=1))
    batch = Batch.of(KEYS_WITH_UPSERT_KEY, [("one", first), ("two", second)], timed=True)
    pks = [step.row[0] for step in batch.steps if not isinstance(step, Advance)]
    assert pks == ["0|1", "0|1", "1|1", "1|1.0"]
    assert batch.steps[3] == Advance(1003)  # the second stream starts past the first's clock
    assert [step.ts for step in batch.steps[4:]] == [1004, 1004]  # type: ignore[union-attr]
    assert batch.origin == [(0, 0), (0, 1), (0, 2), (1, None), (1, 0), (1, 1)]
    assert batch.restore(1, Output(5, "+U", ("1|1.0", "u2", 10, "b"))) == '+U[1.0, "u2", 10, "b"]'
    # one stream alone is fed as it is
    alone = Batch.of(KEYS_WITHOUT_UPSERT_KEY, [("one", first)], timed=True)
    assert alone.steps == list(first)


def test_the_model_runs_on_the_batch_itself() -> None:
    ttl = TtlSettings(
        ttl_ms=5, time_domain=TimeDomain.PROCESSING_TIME, update_type=UpdateType.ON_CREATE_AND_WRITE
    )
    steps: list[Step] = [insert(1, "a"), Advance(5), delete(1, "a")]
    expected = model_outputs(Keys((0,)), steps, ttl, Granularity.PER_ELEMENT)
    assert [[o.op for o in out] for out in expected] == [["+I"], [], []]  # expired: the -D misses


def test_a_buggy_program_is_reported_for_its_own_stream(tmp_path: Path) -> None:
    program = Program(write_program(tmp_path, bug=True))
    good = (insert(1, "u1", 10, "a"), delete(1, "u1", 10, "a"))
    bad = (insert(2, "u1", 10, "a"), insert(2, "u2", 10, "b"), delete(2, "u2", 10, "b"))
    streams = [(KEYS_WITH_UPSERT_KEY, "good", good), (KEYS_WITH_UPSERT_KEY, "bad", bad)]
    with pytest.raises(AssertionError) as caught:
        check_program_streams(program, streams)
    message = str(caught.value)
    assert "stream 2 of 2 fed in one run" in message
    assert "input [2] -D[2, 'u1', 10, 'b']" not in message  # rows are shown as the stream wrote them
    assert """expected ['+U[2, "u1", 10, "a"]'], the program emitted ['-D[2, "u1", 10, "a"]']""" in message
    check_program_streams(Program(write_program(tmp_path, bug=False)), streams)


def test_a_session_feeds_streams_to_one_process_on_keys_of_their_own(tmp_path: Path) -> None:
    program = Program(write_program(tmp_path, bug=False))
    stream = (insert(1, "u1", 10, "a"), insert(1, "u2", 10, "b"), delete(1, "u2", 10, "b"))
    for _ in range(3):  # the same stream thrice: it would fail on shared keys
        check_in_session(program, KEYS_WITH_UPSERT_KEY, "s", stream)
    session = session_for(program, KEYS_WITH_UPSERT_KEY, {}, 4)
    assert session.streams == 3 and session.next_index == 12  # 3 x (3 inputs + the sentinel)
    close_all()


def test_a_session_reports_a_program_that_exits(tmp_path: Path) -> None:
    script = tmp_path / "quits.py"
    script.write_text("import sys\nsys.stdin.readline()\nprint('dying', file=sys.stderr)\n", encoding="utf-8")
    program = Program(f"{PYTHON} {shlex.quote(str(script))}")
    with pytest.raises(ProtocolError, match=r"(?s)exited with 0 before answering input 1.*dying"):
        check_in_session(program, Keys((0,)), "s", (insert(1),))
    close_all()


def test_a_crashing_program_is_a_protocol_error() -> None:
    program = Program(f"{PYTHON} -c 'import sys; sys.stdin.read(); sys.exit(70)'")
    with pytest.raises(ProtocolError, match="exited with 70"):
        check_program_streams(program, [(Keys((0,)), "s", (insert(1),))])


# -- whole suite runs (pytest in a fresh process) -----------------------------------------------


@pytest.fixture
def ci_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "upsertmat-ci")
    monkeypatch.delenv("UPSERTMAT_EXAMPLES_SCALE", raising=False)


@pytest.mark.slow
@pytest.mark.usefixtures("ci_profile")
@pytest.mark.parametrize(
    ("arguments", "granularity"),
    [("--strategy legacy", "per_key"), ("--strategy map --backend lmdb", "per_element")],
    ids=["LEGACY-heap", "MAP-lmdb"],
)
def test_replay_passes_the_whole_suite_through_the_protocol(
    pytester: pytest.Pytester, arguments: str, granularity: str
) -> None:
    command = f"{REPLAY} {arguments} --state-dir {{STATE}} --stream-line {{FIRST_LINE}}"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--upsertmat-cmd={command}", f"--upsertmat-ttl-granularity={granularity}"
    )
    # skipped: the two step-by-step state machines, and the other granularity's TTL scenarios
    other = PER_ELEMENT_TTL if granularity == "per_key" else len(TTL_SCENARIOS) - PER_ELEMENT_TTL
    result.assert_outcomes(passed=SUITE_TESTS - 2 - other, skipped=2 + other)


@pytest.mark.usefixtures("ci_profile")
def test_a_buggy_program_fails_with_a_minimal_stream(pytester: pytest.Pytester, tmp_path: Path) -> None:
    command = write_program(tmp_path, bug=True)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--upsertmat-cmd={command}", "-k", "valid_streams"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*the stream (fed to a running program on sink keys of its own*expected ['+U*emitted ['-D*"]
    )
    # shrunk: a few rows of one key, the last one retracted
    arrival = next(line for line in result.stdout.lines if line.strip().startswith("arrival=["))
    assert arrival.count("[1, ") <= 5, arrival


@pytest.mark.usefixtures("ci_profile")
def test_refused_settings_and_no_state_placeholder_skip_with_reasons(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    command = write_program(tmp_path, bug=False)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--upsertmat-cmd={command}", "-rs", "-k", "ttl or lifecycle"
    )
    result.stdout.fnmatch_lines(
        ["*the program refused --pk 0 --set table.exec.state.ttl=*this program supports no settings*"]
    )
    result.stdout.fnmatch_lines(["*split runs need a {STATE} placeholder in the command*"])
    # every TTL scenario, TTL stream test, the TTL state machine and the lifecycle test
    result.assert_outcomes(skipped=len(TTL_SCENARIOS) + len(TTL_CONFIGS) + 2, deselected=SUITE_TESTS - 19)
