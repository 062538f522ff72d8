"""``upsertmat replay`` in-process: the example and the design's arrival orders, exact types, clock lines,
warnings and progress, options and configuration errors, every heap strategy and LMDB with long
keys alike."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from upsertmat import __version__
from upsertmat.errors import ExitCode
from upsertmat.impls.build import build_name
from upsertmat.impls.persistence import MANIFEST_NAME

from ..conftest import Cli
from .support import (
    EXAMPLE,
    HEAP_STRATEGIES,
    ROOT,
    change,
    lines,
    random_stream,
)


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
