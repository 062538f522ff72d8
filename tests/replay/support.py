"""What the tests of ``upsertmat replay`` share: the example, in-process and console-script runs
(the ``cli`` fixture and its :class:`~tests.conftest.Result` are tests/conftest.py's), changelog lines, random
streams."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from upsertmat.impls import available
from upsertmat.impls.settings import Backend

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "out-of-order.jsonl"
SCRIPT = shutil.which("upsertmat") or str(Path(sys.executable).with_name("upsertmat"))
HEAP_STRATEGIES = [strategy.value for strategy, backend in available() if backend is Backend.HEAP]


def lines(*objects: object) -> str:
    return "".join(json.dumps(obj) + "\n" for obj in objects)


def change(op: str, *row: object, **extra: object) -> dict[str, object]:
    return {"op": op, "row": list(row), **extra}


# -- formats and the example ---------------------------------------------------------------------


GOOD = [change("+I", 1, "a"), change("+I", 2, "b"), change("-D", 1, "a")]


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


def script(*argv: str | Path, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SCRIPT, *map(str, argv)], input=stdin, capture_output=True, text=True, timeout=60, cwd=cwd
    )
