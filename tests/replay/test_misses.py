"""``upsertmat replay`` explains its misses: planted non-deterministic columns (a UUID-like value,
a timestamp, a float differing in its last digits), a missing ADD and a TTL expiry are each
told apart and named, a clean stream reports nothing, and the output never changes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from upsertmat.impls import available
from upsertmat.impls.settings import Backend

PAIRS = [
    f"{s.value}/{b.value}" for s, b in available() if b is not Backend.HEAP or s.value in ("LEGACY", "MAP")
]


def line(op: str, *row: object) -> str:
    return json.dumps({"op": op, "row": list(row)}) + "\n"


def planted() -> str:
    """Columns (id, name, uuid, ts, amount). Keys 0-9: the update's -U carries a recomputed uuid
    and ts; keys 10-14: a float sum computed twice; key 20: a retraction of a row never added;
    key 30: a row expired by TTL (10 ms) before its retraction."""
    text = ""
    for key in range(10):
        text += line("+I", key, "n", f"{key:08x}-aaaa-4bbb-8ccc-{key:012x}", 1_000 + key, 1.5)
        text += line("-U", key, "n", f"{key + 50:08x}-dddd-4eee-8fff-{key:012x}", 1_005 + key, 1.5)
        text += line("+U", key, "m", f"{key:08x}-aaaa-4bbb-8ccc-{key:012x}", 1_000 + key, 2.5)
    for key in range(10, 15):
        text += line("+I", key, "n", "u", 1, 0.1 + 0.2) + line("-D", key, "n", "u", 1, 0.3)
    text += line("-D", 20, "n", "u", 1, 1.0)
    text += (
        line("+I", 30, "n", "u", 1, 1.0) + json.dumps({"time": 50}) + "\n" + line("-D", 30, "n", "u", 1, 1.0)
    )
    return text


def replay(tmp_path: Path, text: str, *options: str) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "in.jsonl"
    source.write_text(text, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "upsertmat", "replay", "--pk", "0", "--ttl", "10", *options, str(source)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("pair", PAIRS)
def test_every_planted_miss_is_explained_and_the_output_unchanged(tmp_path: Path, pair: str) -> None:
    strategy, backend = pair.split("/")
    explained = replay(
        tmp_path, planted(), "--strategy", strategy, "--backend", backend, "--misses", "m.jsonl"
    )
    assert explained.returncode == 0, explained.stderr
    records = [json.loads(text) for text in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert len(records) == 17  # 10 + 5 + 1 + 1
    by_key = {record["key"][0]: record for record in records}
    for key in range(10):
        assert by_key[key]["cause"] == "differs"
        assert [d["column"] for d in by_key[key]["candidates"][0]["diffs"]] == [2, 3]
    for key in range(10, 15):
        assert [d["column"] for d in by_key[key]["candidates"][0]["diffs"]] == [4]
    assert (by_key[20]["cause"], by_key[30]["cause"]) == ("never_added", "expired")
    summary = [text.removeprefix("upsertmat replay: ") for text in explained.stderr.splitlines()]
    assert "17 retraction(s) matched no stored row (rule 7):" in summary
    assert "  1 found their sink key empty because its rows expired by TTL" in summary
    hints = {text.split(" differed")[0].strip(): text for text in summary if " differed in " in text}
    assert "a non-deterministic column" in hints["column 2"]
    assert "NOW(), PROCTIME()" in hints["column 3"]
    assert "floats equal to 9 significant digits" in hints["column 4"]
    quiet = replay(
        tmp_path,
        planted(),
        "--strategy",
        strategy,
        "--backend",
        backend,
        "--set",
        "upsertmat.misses.max-rows=0",
    )
    assert quiet.stdout == explained.stdout  # the explanations change no output
    assert (
        "17 retraction(s) matched no stored row (not explained: upsertmat.misses.max-rows is 0)"
        in quiet.stderr
    )


def test_a_clean_stream_reports_no_miss(tmp_path: Path) -> None:
    clean = "".join(line("+I", key, "n", "u", 1, 1.5) + line("-U", key, "n", "u", 1, 1.5) for key in range(5))
    done = replay(tmp_path, clean, "--misses", "m.jsonl")
    assert done.returncode == 0 and done.stderr == ""
    assert (tmp_path / "m.jsonl").read_text() == ""


def test_a_misses_file_that_cannot_be_written_is_a_usage_error(tmp_path: Path) -> None:
    done = replay(
        tmp_path, line("+I", 1, "n", "u", 1, 1.5), "--misses", str(tmp_path / "no" / "such" / "m.jsonl")
    )
    assert done.returncode == 2
    assert done.stderr.startswith("upsertmat replay: cannot open --misses file ")
