"""A state directory restored as one instance of several (``restore --parallelism Q --index I``)
knows the key groups it owns: fed the whole input, it applies the changes of its keys and
skips the others with a count (never applies them), so the instances' outputs together are
one run's. A refused restore leaves nothing behind, and says what the real conflict is.
(Issue #33, items 3 and 7/S13.)"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from upsertmat.cli import main
from upsertmat.errors import ExitCode
from upsertmat.impls.lifecycle import key_group_range
from upsertmat.spec import Keys

KEYS = Keys(pk=(0,), upsert_key=(1,))


def stream(seed: int, size: int) -> list[str]:
    """Adds and retractions (some missing) of 40 sink keys with clock lines: rows (pk, uk, v)."""
    rnd = random.Random(seed)
    live: list[list[object]] = []
    lines = []
    for step in range(size):
        if rnd.random() < 0.05:
            lines.append(json.dumps({"time": step}))
        elif live and rnd.random() < 0.4:
            row = live.pop(rnd.randrange(len(live)))
            lines.append(json.dumps({"op": rnd.choice(["-U", "-D"]), "row": row}))
        else:
            row = [rnd.randrange(40), rnd.randrange(3), f"v{step}"]
            live.append(row)
            lines.append(json.dumps({"op": rnd.choice(["+I", "+U"]), "row": row}))
    return [line + "\n" for line in lines]


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str]:
    code = main([str(arg) for arg in argv])
    return code, capsys.readouterr().err


FLAGS = ["--pk", "0", "--upsert-key", "1", "-q"]


@pytest.mark.parametrize(("strategy", "backend"), [("MAP", "rocksdb"), ("LEGACY", "heap"), ("VALUE", "lmdb")])
def test_restored_instances_fed_the_whole_input_equal_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: str, backend: str
) -> None:
    lines = stream(seed=len(strategy), size=600)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(lines[:300]))
    second.write_text("".join(lines[300:]))
    flags = [*FLAGS, "--ttl", "100", "--strategy", strategy, "--backend", backend]
    one = tmp_path / "one"
    assert run(capsys, "replay", *flags, "--state-dir", one, "-o", tmp_path / "o1", first)[0] == 0
    assert run(capsys, "savepoint", "--state-dir", one, "-o", tmp_path / "sp")[0] == 0
    assert run(capsys, "replay", *flags, "--state-dir", one, "-o", tmp_path / "o2", second)[0] == 0
    expected = (tmp_path / "o2").read_text().splitlines()

    outputs: list[str] = []
    skipped = 0
    for index in range(3):
        part = tmp_path / f"part{index}"
        code, err = run(capsys, "restore", tmp_path / "sp", "--state-dir", part, "--parallelism", "3",
                        "--index", str(index), "--strategy", strategy, "--backend", backend)  # fmt: skip
        assert code == 0, err
        assert "instance" in err and "key groups" in err
        manifest = json.loads((part / "manifest.json").read_text())
        assert manifest["partition"] == {"max_parallelism": 128, "parallelism": 3, "index": index}
        code, err = run(capsys, "replay", *flags, "--state-dir", part, "-o", tmp_path / f"p{index}", second)
        assert code == 0, err
        said = [line for line in err.splitlines() if "other instances own" in line]
        assert len(said) == 1, err
        skipped += int(said[0].split("skipped ")[1].split(" ")[0])
        outputs += (tmp_path / f"p{index}").read_text().splitlines()
        # What the instance holds is its key groups only: nothing routed elsewhere was applied.
        assert run(capsys, "savepoint", "--state-dir", part, "-o", tmp_path / f"sp{index}")[0] == 0
        summary = json.loads((tmp_path / f"sp{index}" / "manifest.json").read_text())
        owned = key_group_range(index, 3)
        assert all(entry["key_group"] in owned for entry in summary["files"])
        assert summary["extra"]["partition"] == {"max_parallelism": 128, "parallelism": 3, "index": index}
    assert sorted(outputs, key=lambda line: json.loads(line)["in"]) == expected
    changes = sum('"op"' in line for line in lines[300:])
    assert skipped == 2 * changes  # each change is applied by one instance and skipped by two


def test_a_partial_savepoint_restores_only_within_its_key_groups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(stream(seed=7, size=200)))
    assert run(capsys, "replay", *FLAGS, "--state-dir", tmp_path / "st", "-o", tmp_path / "o", source)[0] == 0
    assert run(capsys, "savepoint", "--state-dir", tmp_path / "st", "-o", tmp_path / "sp")[0] == 0
    part = tmp_path / "part1"
    assert (
        run(capsys, "restore", tmp_path / "sp", "--state-dir", part, "--parallelism", "2", "--index", "1")[0]
        == 0
    )
    code, err = run(
        capsys, "savepoint", "--state-dir", part, "-o", tmp_path / "sp1", "--max-parallelism", "64"
    )
    assert code == ExitCode.USAGE and "instance 1 of 2 of 128 key groups" in err, err
    assert run(capsys, "savepoint", "--state-dir", part, "-o", tmp_path / "sp1")[0] == 0
    code, err = run(capsys, "restore", tmp_path / "sp1", "--state-dir", tmp_path / "whole")
    assert code == ExitCode.STATE_DIR, err
    assert "holds only instance 1 of 2 (key groups 64-127 of 128)" in err
    assert "--parallelism 1 --index 0 would own key groups 0-127" in err
    assert not (tmp_path / "whole").exists()
    code, err = run(capsys, "restore", tmp_path / "sp1", "--state-dir", tmp_path / "quarter",
                    "--parallelism", "4", "--index", "3")  # fmt: skip
    assert code == 0, err
    assert "(instance 3 of 4 (key groups 96-127 of 128), LEGACY/heap)" in err
    files = json.loads((tmp_path / "sp1" / "manifest.json").read_text())["files"]
    expected = sum(entry["keys"] for entry in files if entry["key_group"] in key_group_range(3, 4))
    assert expected and f"holds {expected} key(s)" in err


def test_restoring_into_a_directory_with_state_names_that_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: another strategy was told 'strategy is LEGACY but the state directory's is MAP ...
    run with the same settings', as if a replay were started."""
    source = tmp_path / "in.jsonl"
    source.write_text("".join(stream(seed=3, size=50)))
    state = tmp_path / "st"
    assert (
        run(
            capsys, "replay", *FLAGS, "--strategy", "MAP", "--state-dir", state, "-o", tmp_path / "o", source
        )[0]
        == 0
    )
    assert run(capsys, "savepoint", "--state-dir", state, "-o", tmp_path / "sp")[0] == 0
    before = sorted(path.name for path in state.iterdir())
    for strategy in ("LEGACY", "MAP"):
        code, err = run(capsys, "restore", tmp_path / "sp", "--state-dir", state, "--strategy", strategy)
        assert code == ExitCode.STATE_DIR
        assert err.strip() == (
            f"upsertmat restore: {state} already holds replay state (MAP/heap at stream line 50, "
            f"{state / 'manifest.json'}); restore creates a new state directory: give a new or empty "
            f"--state-dir, or remove {state} first"
        )
    assert sorted(path.name for path in state.iterdir()) == before


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--backend", "spark"], ExitCode.USAGE, "spark"),
        (["--ttl", "5"], ExitCode.STATE_DIR, "was taken with TTL off but the restore uses 5 ms"),
    ],
    ids=["unavailable backend", "other TTL"],
)
@pytest.mark.parametrize("target", ["new/nested/dir", "existing-empty"])
def test_a_refused_restore_leaves_nothing_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str, target: str
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(stream(seed=5, size=30)))
    assert run(capsys, "replay", *FLAGS, "--state-dir", tmp_path / "st", "-o", tmp_path / "o", source)[0] == 0
    assert run(capsys, "savepoint", "--state-dir", tmp_path / "st", "-o", tmp_path / "sp")[0] == 0
    if target == "existing-empty":
        (tmp_path / target).mkdir()
    for _ in range(2):  # and the same command again meets the same refusal
        got, err = run(capsys, "restore", tmp_path / "sp", "--state-dir", tmp_path / target, *argv)
        assert (got, len(err.strip().splitlines())) == (code, 1), err
        assert message in err
        if target == "existing-empty":
            assert list((tmp_path / target).iterdir()) == []
        else:
            assert not (tmp_path / "new").exists()
