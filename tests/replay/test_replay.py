"""``upsertmat replay`` end to end: in-process ``main(argv)`` and real console-script runs."""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from upsertmat import __version__
from upsertmat.cli import main
from upsertmat.errors import ExitCode
from upsertmat.impls import available
from upsertmat.impls.build import build_name
from upsertmat.impls.persistence import MANIFEST_NAME
from upsertmat.impls.settings import Backend

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "out-of-order.jsonl"
SCRIPT = shutil.which("upsertmat") or str(Path(sys.executable).with_name("upsertmat"))
HEAP_STRATEGIES = [strategy.value for strategy, backend in available() if backend is Backend.HEAP]


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def records(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.out.splitlines()]


Cli = Callable[..., Result]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """Run ``main`` in-process; ``stdin=`` feeds standard input."""

    def run(*argv: str | Path, stdin: str | None = None) -> Result:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8"))))
        code = main([str(arg) for arg in argv])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def lines(*objects: object) -> str:
    return "".join(json.dumps(obj) + "\n" for obj in objects)


def change(op: str, *row: object, **extra: object) -> dict[str, object]:
    return {"op": op, "row": list(row), **extra}


# -- formats and the example ---------------------------------------------------------------------


def test_the_example_reproduces_its_expected_output(cli: Cli) -> None:
    result = cli("replay", "--pk", "0", "--strategy", "legacy", "--backend", "heap", EXAMPLE)
    assert result.code == 0
    assert result.out == (ROOT / "examples" / "out-of-order.expected.jsonl").read_text(encoding="utf-8")
    assert 'line 15: warning: -D [5, 10, "early"] matched no stored row' in result.err
    keyed = cli("replay", "--pk", "0", "--upsert-key", "1", "-q", EXAMPLE)
    assert (keyed.code, keyed.err) == (0, "")
    assert keyed.out == (ROOT / "examples" / "out-of-order.upsert-key.expected.jsonl").read_text(
        encoding="utf-8"
    )


def test_the_three_arrival_orders_of_the_design(cli: Cli) -> None:
    a1: list[object] = [1, 10, "a1"]
    b1: list[object] = [1, 20, "b1"]
    orders: dict[str, tuple[tuple[str, list[object]], ...]] = {
        "I -U +U": (("+I", a1), ("-U", a1), ("+U", b1)),
        "I +U -U": (("+I", a1), ("+U", b1), ("-U", a1)),
        "+U I -U": (("+U", b1), ("+I", a1), ("-U", a1)),
    }
    expected = {
        "I -U +U": [(0, "+I", a1), (1, "-D", a1), (2, "+I", b1)],
        "I +U -U": [(0, "+I", a1), (1, "+U", b1)],
        "+U I -U": [(0, "+I", b1), (1, "+U", a1), (2, "+U", b1)],
    }
    for name, order in orders.items():
        result = cli("replay", "--pk", "0", "-", stdin=lines(*(change(op, *row) for op, row in order)))
        assert [(r["in"], r["op"], r["row"]) for r in result.records] == expected[name], name


def test_stdin_stdout_and_output_file_agree(cli: Cli, tmp_path: Path) -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    from_stdin = cli("replay", "--pk", "0", "-q", stdin=text)
    to_file = cli("replay", "--pk", "0", "-q", EXAMPLE, "-o", tmp_path / "out.jsonl")
    assert (to_file.code, to_file.out) == (0, "")
    assert from_stdin.out == (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert from_stdin.out == cli("replay", "--pk", "0", "-q", EXAMPLE).out


def test_types_are_kept_exactly_and_blank_lines_count(cli: Cli) -> None:
    stream = (
        '{"op": "+I", "row": [1, 1.0, "é😀", null, {"b": [true], "a": 1}]}\n'
        "\n"
        "   \n"
        '{"op": "+U", "row": [1, 1, "x", false, []]}\n'
        '{"op": "-U", "row": [1, 1, "x", false, []]}'  # no final newline
    )
    result = cli("replay", "--pk", "0", stdin=stream)
    assert result.out == (
        '{"in": 0, "op": "+I", "row": [1, 1.0, "é😀", null, {"b": [true], "a": 1}]}\n'
        '{"in": 3, "op": "+U", "row": [1, 1, "x", false, []]}\n'
        '{"in": 4, "op": "+U", "row": [1, 1.0, "é😀", null, {"b": [true], "a": 1}]}\n'
    )


def test_time_lines_are_accepted_and_emit_nothing(cli: Cli, tmp_path: Path) -> None:
    stream = lines({"time": 5}, change("+I", 1, "a", ts=3), {"time": 1002}, change("-D", 1, "a"))
    result = cli("replay", "--pk", "0", "--state-dir", tmp_path / "st", stdin=stream)
    assert [(r["in"], r["op"]) for r in result.records] == [(1, "+I"), (3, "-D")]
    manifest = json.loads((tmp_path / "st" / MANIFEST_NAME).read_text())
    assert (manifest["now"], manifest["lines"], manifest["arity"]) == (1002, 4, 2)


def test_retraction_misses_are_warned_with_their_line_and_quiet_hides_them(cli: Cli) -> None:
    stream = lines(change("-D", 1, "a"), change("+I", 1, "a"), change("-U", 2, "b"))
    result = cli("replay", "--pk", "0", stdin=stream)
    never = (
        "holds no row and none of it expired (no ADD of it has arrived on this key: lost, still to come, "
        "or sent with another sink key)"
    )
    assert result.err.splitlines() == [
        'upsertmat replay: line 1: warning: -D [1, "a"] matched no stored row (rule 7: nothing emitted): '
        f"sink key [1] {never}",
        'upsertmat replay: line 3: warning: -U [2, "b"] matched no stored row (rule 7: nothing emitted): '
        f"sink key [2] {never}",
        "upsertmat replay: 2 retraction(s) matched no stored row (rule 7):",
        "upsertmat replay:   2 found their sink key empty, nothing of it expired: no ADD had arrived "
        "(lost, still to come, or sent with another sink key)",
    ]
    assert cli("replay", "--pk", "0", "--quiet", stdin=stream).err == ""


def test_progress_only_when_asked_or_on_a_terminal(cli: Cli) -> None:
    stream = lines(*(change("+I", n, "a") for n in range(3000)))
    assert cli("replay", "--pk", "0", stdin=stream).err == ""  # captured stderr is not a TTY
    err = cli("replay", "--pk", "0", "--progress", stdin=stream).err
    assert err.startswith("\rupsertmat replay: ")
    assert "3000 lines, 3000 changes emitted" in err
    assert err.endswith("\n")


def test_a_resumed_runs_progress_counts_its_own_lines(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a stop at line 1501 of 4000, the resumed run's progress line counts its own 2500
    lines: never the stream position (which would inflate the rate and end below an earlier
    figure)."""
    from upsertmat.replay import progress

    monkeypatch.setattr(progress, "INTERVAL", 0.0)  # draw at every 1024th line
    good = [change("+I", n, "a") for n in range(4000)]
    source = tmp_path / "in.jsonl"
    source.write_text(lines(*good[:1500]) + "oops\n" + lines(*good[1501:]))
    state, out = tmp_path / "st", tmp_path / "out"
    args = ["replay", "--pk", "0", "--progress", "--state-dir", state, "-o", out, source]
    assert cli(*args).code == ExitCode.BAD_INPUT
    source.write_text(lines(*good))
    resumed = cli(*args)
    assert resumed.code == 0
    drawn = [int(count) for count in re.findall(r"\r\S+ \S+: (\d+) lines", resumed.err)]
    assert drawn == [1024, 2048, 2500]


@pytest.mark.parametrize("strategy", HEAP_STRATEGIES)
def test_every_heap_strategy_replays_the_example_alike(cli: Cli, strategy: str) -> None:
    expected = (ROOT / "examples" / "out-of-order.expected.jsonl").read_text(encoding="utf-8")
    assert cli("replay", "--pk", "0", "-q", "--strategy", strategy.lower(), EXAMPLE).out == expected


# -- help, version, usage errors -----------------------------------------------------------------


def test_help_and_version(cli: Cli) -> None:
    top = cli("--help")
    assert top.code == 0
    assert "replay" in top.out
    replay = cli("replay", "--help")
    assert replay.code == 0
    assert "examples:" in replay.out
    assert (
        "upsertmat replay --pk 0 --strategy legacy --backend heap examples/out-of-order.jsonl" in replay.out
    )
    assert "exit codes:" in replay.out
    version = cli("--version")
    assert (version.code, version.out) == (0, f"upsertmat {__version__} ({build_name()})\n")
    assert cli().code == ExitCode.USAGE


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["replay", "-"], "the following arguments are required: --pk"),
        (["replay", "--pk", "a"], "expected comma-separated 0-based column indexes"),
        (["replay", "--pk", "0,0"], "column 0 is named twice"),
        (["replay", "--pk", "-1"], "expected comma-separated 0-based column indexes"),
        (["replay", "--pk", "0", "--arity", "0"], "expected a positive integer"),
        (["replay", "--pk", "3", "--arity", "2"], "an arity of 2 leaves out key column 3"),
        (["replay", "--pk", "0", "--on-error", "ignore"], "invalid choice: 'ignore'"),
        (
            ["replay", "--pk", "0", "--set", "no.such.key=1"],
            "unknown configuration key 'no.such.key' (from --set",
        ),
        (["replay", "--pk", "0", "--set", "nonsense"], "--set expects KEY=VALUE"),
        (["replay", "--pk", "0", "--strategy", "linked"], "bad value 'linked' for table.exec.sink"),
        (["replay", "--pk", "0", "--backend", "spark"], "spark"),
        (
            ["replay", "--pk", "0", "--dead-letter", "x.jsonl"],
            "--dead-letter is only used with --on-error skip",
        ),
        (["replay", "--pk", "0", "no-such-file.jsonl"], "cannot open input no-such-file.jsonl"),
        (["replay", "--pk", "0", "--config", "no-such.yaml"], "cannot read config file no-such.yaml"),
        (["bench-nothing"], "invalid choice: 'bench-nothing'"),
    ],
)
def test_usage_and_configuration_errors_exit_2(cli: Cli, argv: list[str], message: str) -> None:
    result = cli(*argv, stdin="")
    assert result.code == ExitCode.USAGE
    assert message in result.err
    assert result.out == ""


def test_config_file_and_set_layering_reach_the_materializer(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "job.yaml"
    config.write_text("table:\n  exec:\n    state:\n      ttl: 10 ms\n", encoding="utf-8")
    text = '{"op": "+I", "row": [1]}\n{"time": 10}\n{"op": "-D", "row": [1]}\n'
    expired = cli("replay", "--pk", "0", "-q", "--config", config, "-", stdin=text)
    assert expired.code == 0
    assert expired.out == '{"in": 0, "op": "+I", "row": [1]}\n'  # the TTL expired the row
    for override in (["--set", "table.exec.state.ttl=0"], ["--ttl", "0 ms"]):
        kept = cli("replay", "--pk", "0", "-q", "--config", config, *override, "-", stdin=text)
        assert kept.code == 0
        assert kept.out.count("\n") == 2, kept.out


# -- bad input -----------------------------------------------------------------------------------

GOOD = [change("+I", 1, "a"), change("+I", 2, "b"), change("-D", 1, "a")]


def test_fail_stops_at_the_bad_line_and_keeps_everything_before_it(cli: Cli, tmp_path: Path) -> None:
    stream = lines(*GOOD[:2]) + '{"op": "+X", "row": [3, "c"]}\n' + lines(GOOD[2])
    result = cli("replay", "--pk", "0", "--state-dir", tmp_path / "st", "-o", tmp_path / "out", stdin=stream)
    assert result.code == ExitCode.BAD_INPUT
    assert result.err.splitlines()[0] == (
        "upsertmat replay: line 3: unknown op '+X' (expected one of +I, -U, +U, -D)"
    )
    assert "stopped at line 3 (lines count from 1" in result.err
    assert f"state saved in {tmp_path / 'st'}, its next line is in=2" in result.err
    assert (tmp_path / "out").read_text() == (
        '{"in": 0, "op": "+I", "row": [1, "a"]}\n{"in": 1, "op": "+I", "row": [2, "b"]}\n'
    )
    # going on from the (fixed) bad line continues exactly where one good run would be
    rest = cli(
        "replay",
        "--pk",
        "0",
        "--state-dir",
        tmp_path / "st",
        "--stream-line",
        "2",
        stdin=lines(change("+I", 3, "c"), GOOD[2]),
    )
    assert rest.code == 0
    whole = cli("replay", "--pk", "0", stdin=lines(*GOOD[:2], change("+I", 3, "c"), GOOD[2]))
    assert (tmp_path / "out").read_text() + rest.out == whole.out


def test_skip_writes_bad_lines_to_the_dead_letter_file_and_goes_on(cli: Cli, tmp_path: Path) -> None:
    stream = (
        lines(GOOD[0])
        + "not json\n"
        + lines(change("+I", 2))  # wrong arity (2 columns fixed by the first change)
        + "\n"
        + lines(change("+I", 2, "b"), {"op": "+I", "row": [3, "c"], "time": 1}, GOOD[2])
    )
    dead = tmp_path / "dead.jsonl"
    result = cli("replay", "--pk", "0", "--on-error", "skip", "--dead-letter", dead, stdin=stream)
    assert result.code == 0
    assert [(r["in"], r["op"]) for r in result.records] == [(0, "+I"), (4, "+I"), (6, "-D")]
    assert [json.loads(line) for line in dead.read_text().splitlines()] == [
        {"line": 2, "in": 1, "error": "invalid JSON: Expecting value (column 1)", "text": "not json"},
        {
            "line": 3,
            "in": 2,
            "error": "row has 1 column(s), expected 2 (the stream's arity)",
            "text": '{"op": "+I", "row": [2]}',
        },
        {
            "line": 6,
            "in": 5,
            "error": "a line is either a change ('op') or a clock advance ('time'), not both",
            "text": '{"op": "+I", "row": [3, "c"], "time": 1}',
        },
    ]
    assert "upsertmat replay: line 2: invalid JSON: Expecting value (column 1) (skipped)" in result.err
    assert f"skipped 3 bad line(s); they are in {dead}" in result.err
    cli("replay", "--pk", "0", "--on-error", "skip", "--dead-letter", dead, stdin="oops\n")
    assert len(dead.read_text().splitlines()) == 4  # appended, never truncated


def test_dead_letter_defaults(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cli("replay", "--pk", "0", "--on-error", "skip", stdin="oops\n")
    assert json.loads((tmp_path / "upsertmat-dead-letter.jsonl").read_text())["text"] == "oops"
    cli("replay", "--pk", "0", "--on-error", "skip", "--state-dir", "st", stdin="\noops\n")
    assert json.loads((tmp_path / "st" / "dead-letter.jsonl").read_text())["line"] == 2
    clean = cli("replay", "--pk", "0", "--on-error", "skip", "--state-dir", "st2", stdin=lines(GOOD[0]))
    assert (clean.code, clean.err) == (0, "")
    assert not (tmp_path / "st2" / "dead-letter.jsonl").exists()  # created only when needed


def test_a_key_column_missing_is_bad_input(cli: Cli) -> None:
    result = cli("replay", "--pk", "0", "--upsert-key", "2", stdin=lines(change("+I", 1, "a")))
    assert result.code == ExitCode.BAD_INPUT
    assert (
        "line 1: row has 2 column(s); the upsert key column 2 is missing (columns count from 0)" in result.err
    )


def test_a_given_arity_is_enforced_from_the_first_line(cli: Cli) -> None:
    result = cli("replay", "--pk", "0", "--arity", "3", stdin=lines(change("+I", 1, "a")))
    assert result.code == ExitCode.BAD_INPUT
    assert "line 1: row has 2 column(s), expected 3" in result.err


# -- state directory -----------------------------------------------------------------------------


def random_stream(
    seed: int,
    size: int,
    make_row: Callable[[random.Random], list[object]] | None = None,
    clock: float = 0.05,
) -> list[str]:
    """Adds and retractions of random live rows, a clock line with probability ``clock``.

    Rows come from ``make_row`` (default: a small key, a value of a JSON type, a small int).
    """
    rnd = random.Random(seed)
    live: list[list[object]] = []
    out: list[str] = []
    for n in range(size):
        roll = rnd.random()
        if roll < clock:
            out.append(json.dumps({"time": n}) + "\n")
        elif roll < 0.45 and live:
            row = live.pop(rnd.randrange(len(live)))
            out.append(json.dumps(change(rnd.choice(["-U", "-D"]), *row)) + "\n")
        else:
            if make_row is None:
                row = [rnd.randrange(6), rnd.choice([1, 1.0, True, None, "x"]), rnd.randrange(3)]
            else:
                row = make_row(rnd)
            live.append(row)
            out.append(json.dumps(change(rnd.choice(["+I", "+U"]), *row)) + "\n")
    return out


@pytest.mark.parametrize("strategy", HEAP_STRATEGIES)
def test_split_runs_over_a_state_dir_equal_one_run(cli: Cli, tmp_path: Path, strategy: str) -> None:
    stream = random_stream(seed=7, size=400)
    flags = ["--pk", "0", "--upsert-key", "2", "-q", "--strategy", strategy]
    whole = cli("replay", *flags, stdin="".join(stream))
    assert whole.code == 0
    cuts = [0, 0, 1, 57, 58, 200, 399, 400, 400]
    parts = []
    for start, stop in itertools.pairwise(cuts):
        part = cli(
            "replay",
            *flags,
            "--state-dir",
            tmp_path / "st",
            "--stream-line",
            str(start),
            stdin="".join(stream[start:stop]),
        )
        assert part.code == 0
        parts.append(part.out)
    assert "".join(parts) == whole.out
    manifest = json.loads((tmp_path / "st" / MANIFEST_NAME).read_text())
    assert manifest["lines"] == 400
    assert manifest["strategy"] == strategy
    assert [p.name for p in (tmp_path / "st").iterdir() if p.name.startswith("snapshot-")] == [
        manifest["snapshot"]
    ]


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (["--pk", "1"], "this run's --pk is 1 but the state directory's is 0"),
        (
            ["--pk", "0", "--upsert-key", "1"],
            "this run's --upsert-key is 1 but the state directory's is (none)",
        ),
        (
            ["--pk", "0", "--strategy", "map"],
            "this run's strategy (table.exec.sink.upsert-materialize-strategy.type)",
        ),
        (
            ["--pk", "0", "--set", "state.backend.type=rocksdb"],
            "this run's backend (state.backend.type) is rocksdb",
        ),
        (["--pk", "0", "--arity", "3"], "this run's --arity is 3 but the stream's arity is 2"),
    ],
)
def test_a_mismatched_run_is_refused(cli: Cli, tmp_path: Path, second: list[str], message: str) -> None:
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(*GOOD)).code == 0
    before = (tmp_path / MANIFEST_NAME).read_text()
    result = cli("replay", *second, "--state-dir", tmp_path, stdin=lines(*GOOD))
    assert result.code == ExitCode.STATE_DIR
    assert message in result.err
    assert str(tmp_path / MANIFEST_NAME) in result.err
    assert (tmp_path / MANIFEST_NAME).read_text() == before


def damage_snapshot(directory: Path, edit: Callable[[bytes], bytes], fix_checksum: bool) -> Path:
    manifest_path = directory / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    snapshot = directory / str(manifest["snapshot"])
    snapshot.write_bytes(edit(snapshot.read_bytes()))
    if fix_checksum:
        import hashlib

        manifest["snapshot_sha256"] = hashlib.sha256(snapshot.read_bytes()).hexdigest()
        manifest_path.write_text(json.dumps(manifest))
    return snapshot


@pytest.mark.parametrize(
    ("edit", "fix_checksum", "message"),
    [
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), False, "its SHA-256 does not match"),
        (lambda data: data[: len(data) // 2], False, "its SHA-256 does not match"),
        (lambda data: data[: len(data) - 3], True, "truncated (no trailer)"),
        (lambda data: b"\x93\x01\x02\x03" + data, True, "not an upsertmat heap snapshot"),
        (lambda data: b"", True, "not an upsertmat heap snapshot"),
    ],
)
def test_a_damaged_snapshot_is_refused(
    cli: Cli, tmp_path: Path, edit: Callable[[bytes], bytes], fix_checksum: bool, message: str
) -> None:
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(*GOOD[:2])).code == 0
    snapshot = damage_snapshot(tmp_path, edit, fix_checksum)
    result = cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(GOOD[2]))
    assert result.code == ExitCode.STATE_DIR
    assert f"damaged snapshot {snapshot}" in result.err
    assert message in result.err
    assert result.out == ""


def test_a_snapshot_with_a_row_under_the_wrong_key_is_refused(cli: Cli, tmp_path: Path) -> None:
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(GOOD[0])).code == 0
    # row [1, "a"] (msgpack 92 01 a1 61) becomes [2, "a"] under key [1]: valid msgpack, right checksum
    damage_snapshot(tmp_path, lambda data: data.replace(b"\x91\x92\x01\xa1a", b"\x91\x92\x02\xa1a"), True)
    result = cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin="")
    assert result.code == ExitCode.STATE_DIR
    assert "a row is stored under a context key that is not its own" in result.err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"format": "something-else", "version": 1}', "not an upsertmat state manifest"),
        (
            '{"format": "upsertmat-replay-state", "version": 99}',
            "has format version 99; this upsertmat reads",
        ),
        ('{"format": "upsertmat-replay-state", "version": 1, "pk": "0"}', "'pk' must be a list of integers"),
        ("", "not valid JSON"),
    ],
)
def test_a_damaged_manifest_is_refused(cli: Cli, tmp_path: Path, content: str, message: str) -> None:
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(*GOOD[:2])).code == 0
    (tmp_path / MANIFEST_NAME).write_text(content)
    result = cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(GOOD[2]))
    assert result.code == ExitCode.STATE_DIR
    assert str(tmp_path / MANIFEST_NAME) in result.err
    assert message in result.err


def test_a_lost_manifest_or_a_foreign_directory_is_refused(cli: Cli, tmp_path: Path) -> None:
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(*GOOD[:2])).code == 0
    (tmp_path / MANIFEST_NAME).unlink()
    result = cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin="")
    assert result.code == ExitCode.STATE_DIR
    assert f"{tmp_path} has no manifest.json but is not empty (snapshot-" in result.err
    (tmp_path / "file").write_text("x")
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path / "file", stdin="").code == ExitCode.STATE_DIR


# -- real processes ------------------------------------------------------------------------------


def script(*argv: str | Path, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SCRIPT, *map(str, argv)], input=stdin, capture_output=True, text=True, timeout=60, cwd=cwd
    )


def test_console_script_exit_codes_and_streams(tmp_path: Path) -> None:
    ok = script("replay", "--pk", "0", "--strategy", "legacy", "--backend", "heap", "-q", EXAMPLE)
    assert (ok.returncode, ok.stderr) == (0, "")
    assert ok.stdout == (ROOT / "examples" / "out-of-order.expected.jsonl").read_text(encoding="utf-8")
    bad = script("replay", "--pk", "0", "-", stdin=lines(GOOD[0]) + '{"op": "+X", "row": [1, 2]}\n')
    assert bad.returncode == 1
    assert bad.stdout == '{"in": 0, "op": "+I", "row": [1, "a"]}\n'
    assert bad.stderr.startswith(
        "upsertmat replay: line 2: unknown op '+X' (expected one of +I, -U, +U, -D)\n"
    )
    usage = script("replay", "--pk", "0", "--set", "bogus=1", stdin="")
    assert usage.returncode == 2
    assert usage.stderr.startswith("upsertmat replay: unknown configuration key 'bogus'")
    assert script("--version").stdout == f"upsertmat {__version__} ({build_name()})\n"
    module = subprocess.run([sys.executable, "-m", "upsertmat", "--version"], capture_output=True, text=True)
    assert module.stdout == f"upsertmat {__version__} ({build_name()})\n"


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A replay process holding ``tmp_path/st``, blocked reading its stdin after one line."""
    process = subprocess.Popen(
        [SCRIPT, "replay", "--pk", "0", "--state-dir", str(tmp_path / "st"), "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(lines(GOOD[0]))
    process.stdin.flush()
    assert process.stdout.readline() == '{"in": 0, "op": "+I", "row": [1, "a"]}\n'  # flushed per input
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


def test_a_second_process_on_a_locked_state_dir_fails_at_once(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    started = time.monotonic()
    second = script("replay", "--pk", "0", "--state-dir", tmp_path / "st", stdin=lines(GOOD[1]))
    assert time.monotonic() - started < 30
    assert second.returncode == ExitCode.STATE_DIR
    assert f"state directory {tmp_path / 'st'} is in use by another upsertmat process" in second.stderr
    assert holder.stdin is not None
    holder.stdin.write(lines(GOOD[1]))
    holder.stdin.close()
    assert holder.wait(timeout=60) == 0
    after = script(
        "replay", "--pk", "0", "--state-dir", tmp_path / "st", "--stream-line", "2", stdin=lines(GOOD[2])
    )
    assert (after.returncode, after.stdout) == (0, '{"in": 2, "op": "-D", "row": [1, "a"]}\n')


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_waiting_for_input_saves_the_state(
    tmp_path: Path, holder: subprocess.Popen[str], signum: int, code: int
) -> None:
    holder.send_signal(signum)
    assert holder.wait(timeout=60) == code
    assert holder.stderr is not None
    assert "interrupted after 1 line(s); state saved" in holder.stderr.read()
    manifest = json.loads((tmp_path / "st" / MANIFEST_NAME).read_text())
    assert manifest["lines"] == 1
    # The interrupted run is unfinished: the same input would resume it; new input says where it starts.
    after = script(
        "replay",
        "--pk",
        "0",
        "--state-dir",
        tmp_path / "st",
        "--stream-line",
        "1",
        stdin=lines(GOOD[1], GOOD[0]),
    )
    assert after.stdout == '{"in": 1, "op": "+I", "row": [2, "b"]}\n{"in": 2, "op": "+U", "row": [1, "a"]}\n'


def test_state_dir_survives_a_kill_between_runs(tmp_path: Path) -> None:
    """SIGKILL mid-run leaves the previous run's state; re-running the killed run's input is exact."""
    first = script("replay", "--pk", "0", "--state-dir", tmp_path / "st", stdin=lines(GOOD[0]))
    assert first.returncode == 0
    process = subprocess.Popen(
        [SCRIPT, "replay", "--pk", "0", "--state-dir", str(tmp_path / "st"), "--stream-line", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(lines(GOOD[1]))
    process.stdin.flush()
    assert process.stdout.readline() == '{"in": 1, "op": "+I", "row": [2, "b"]}\n'
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    again = script(
        "replay",
        "--pk",
        "0",
        "--state-dir",
        tmp_path / "st",
        "--stream-line",
        "1",
        stdin=lines(GOOD[1], GOOD[2]),
    )
    assert again.stdout == '{"in": 1, "op": "+I", "row": [2, "b"]}\n{"in": 2, "op": "-D", "row": [1, "a"]}\n'


BYTE_PAIRS = [
    (strategy.value, backend.value)
    for strategy, backend in available()
    if backend in (Backend.ROCKSDB, Backend.LMDB) and strategy.value in ("MAP", "SORTED")
]


@pytest.mark.parametrize(("strategy", "backend"), BYTE_PAIRS)
def test_byte_backends_keep_their_state_in_the_state_dir(
    cli: Cli, tmp_path: Path, strategy: str, backend: str
) -> None:
    stream = random_stream(seed=11, size=120)
    flags = ["--pk", "0", "-q", "--strategy", strategy, "--backend", backend]
    whole = cli("replay", *flags, stdin="".join(stream))
    assert whole.out == cli("replay", "--pk", "0", "-q", stdin="".join(stream)).out
    first = cli("replay", *flags, "--state-dir", tmp_path, stdin="".join(stream[:50]))
    second = cli("replay", *flags, "--state-dir", tmp_path, "--stream-line", "50", stdin="".join(stream[50:]))
    assert (first.code, second.code) == (0, 0)
    assert first.out + second.out == whole.out
    manifest = json.loads((tmp_path / MANIFEST_NAME).read_text())
    assert (manifest["snapshot"], manifest["in_progress"], manifest["lines"]) == (None, False, 120)
    assert (tmp_path / backend).is_dir()


@pytest.mark.skipif(not any(b == "rocksdb" for _, b in BYTE_PAIRS), reason="rocksdb backend not available")
def test_a_killed_byte_backend_run_resumes_from_its_committed_position(tmp_path: Path) -> None:
    """Crash recovery (more in tests/lifecycle/test_crash_recovery.py): same input, nothing lost.

    A line's output is flushed before its position commits (so a crash can repeat it on stdout
    but never lose it): once line 1's output is read, line 0 is surely committed; line 1 may be.
    """
    flags: list[str | Path] = [
        "replay",
        "--pk",
        "0",
        "--strategy",
        "map",
        "--backend",
        "rocksdb",
        "--state-dir",
        tmp_path,
        "--checkpoint-every",
        "1",
    ]
    outputs = [
        '{"in": 0, "op": "+I", "row": [1, "a"]}\n',
        '{"in": 1, "op": "+I", "row": [2, "b"]}\n',
        '{"in": 2, "op": "-D", "row": [1, "a"]}\n',
    ]
    process = subprocess.Popen(
        [SCRIPT, *map(str, flags)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(lines(GOOD[0], GOOD[1]))
    process.stdin.flush()
    assert [process.stdout.readline(), process.stdout.readline()] == outputs[:2]
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    shorter = script(*flags)
    assert shorter.returncode == ExitCode.STATE_DIR
    committed = re.search(r"stopped after \d+ bytes = stream line (\d+) of its input", shorter.stderr)
    assert committed is not None and committed.group(1) in ("1", "2"), shorter.stderr
    assert "this input does not begin with those bytes" in shorter.stderr
    again = script(*flags, stdin=lines(*GOOD))
    assert again.returncode == 0
    assert again.stdout == "".join(outputs[int(committed.group(1)) :])


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_an_output_that_cannot_be_written_exits_4_and_leaves_the_state_as_before(
    cli: Cli, tmp_path: Path
) -> None:
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(GOOD[0])).code == 0
    before = (tmp_path / MANIFEST_NAME).read_text()
    result = cli(
        "replay",
        "--pk",
        "0",
        "--state-dir",
        tmp_path,
        "--stream-line",
        "1",
        "-o",
        "/dev/full",
        stdin=lines(GOOD[1]),
    )
    assert result.code == ExitCode.IO
    assert "cannot write output /dev/full: No space left on device" in result.err
    after = json.loads((tmp_path / MANIFEST_NAME).read_text())
    kept = ("lines", "snapshot", "snapshot_sha256", "now", "retract_misses")
    assert {k: after[k] for k in kept} == {k: json.loads(before)[k] for k in kept}
    assert after["in_progress"]  # the next run resumes this one (docs/operations.md)
    again = cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(GOOD[1]))
    assert again.out == '{"in": 1, "op": "+I", "row": [2, "b"]}\n'


def test_an_unwritable_dead_letter_file_exits_4(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "dead.jsonl").mkdir()  # its directory exists, but the file cannot be opened
    result = cli(
        "replay",
        "--pk",
        "0",
        "--on-error",
        "skip",
        "--dead-letter",
        tmp_path / "dead.jsonl",
        stdin="oops\n",
    )
    assert result.code == ExitCode.IO
    assert f"cannot write dead-letter file {tmp_path / 'dead.jsonl'}" in result.err


def test_a_reader_that_goes_away_ends_the_run_quietly(tmp_path: Path) -> None:
    """`replay ... | head -1`: exit 128 + SIGPIPE with nothing on stderr, like Unix tools."""
    source = tmp_path / "in.jsonl"
    source.write_text("".join(f'{{"op": "+I", "row": [{i}, "{"x" * 200}"]}}\n' for i in range(5000)))
    process = subprocess.Popen(
        [SCRIPT, "replay", "--pk", "0", str(source)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline().startswith(b'{"in": 0')
    process.stdout.close()
    assert process.wait(timeout=60) == 128 + signal.SIGPIPE
    assert process.stderr.read() == b""
    process.stderr.close()


# -- long keys on LMDB ---------------------------------------------------------------------------


LONG_KEYS = ["é" * 600 + f"key{n}" for n in range(4)] + ["k" * 1000 + "\u0000", "short"]


def long_key_stream(seed: int, size: int) -> list[str]:
    """Changes whose primary keys (mostly) and payloads are 1,000+ characters, with clock lines."""

    def long_row(rnd: random.Random) -> list[object]:
        return [rnd.choice(LONG_KEYS), rnd.randrange(3), "p" * 1000 + str(rnd.randrange(4))]

    return random_stream(seed, size, long_row, clock=0.08)


@pytest.mark.parametrize("strategy", ["legacy", "value", "map", "sorted", "adaptive"])
@pytest.mark.parametrize(
    "options",
    [[], ["--upsert-key", "1"], ["--upsert-key", "1", "--set", "table.exec.state.ttl=15"]],
    ids=["no-upsert-key", "upsert-key", "upsert-key-ttl"],
)
def test_lmdb_replays_long_keys_like_heap(
    cli: Cli, tmp_path: Path, strategy: str, options: list[str]
) -> None:
    """Primary keys and payloads beyond LMDB's 511-byte key limit (hashed keys in every state):
    the output is heap's byte for byte, in one run and in two runs over one state directory."""
    stream = long_key_stream(seed=len(strategy) + len(options), size=300)
    flags = ["--pk", "0", *options, "-q", "--strategy", strategy]
    heap = cli("replay", *flags, "--backend", "heap", stdin="".join(stream))
    assert heap.code == 0
    assert len(heap.records) > 100
    whole = cli("replay", *flags, "--backend", "lmdb", stdin="".join(stream))
    assert (whole.code, whole.err) == (0, "")
    assert whole.out == heap.out
    state = ["--backend", "lmdb", "--state-dir", tmp_path / "st"]
    first = cli("replay", *flags, *state, stdin="".join(stream[:140]))
    second = cli("replay", *flags, *state, "--stream-line", "140", stdin="".join(stream[140:]))
    assert (first.code, second.code) == (0, 0)
    assert first.out + second.out == heap.out
