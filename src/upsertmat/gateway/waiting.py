"""Source files a job has not read yet: the files of its source directory against the entries
of Spark's source log in its checkpoint (what ``upsertmat_job_files_waiting`` and the status
page's plot show). Reads directories and small log files; no Spark."""

from __future__ import annotations

import os
from pathlib import Path


def count_files(directory: os.PathLike[str] | str) -> int:
    """Visible files in a source directory (Spark ignores names starting with ``.`` or ``_``)."""
    try:
        with os.scandir(directory) as entries:
            return sum(1 for entry in entries if entry.is_file() and not entry.name.startswith((".", "_")))
    except OSError:
        return 0


def _batch_files(directory: Path) -> dict[int, str]:
    """Spark's log files in ``directory`` by batch id (``7``, ``9.compact``)."""
    try:
        names = [entry.name for entry in os.scandir(directory) if not entry.name.startswith(".")]
    except OSError:
        return {}
    batches: dict[int, str] = {}
    for name in names:
        stem = name.removesuffix(".compact")
        if stem.isascii() and stem.isdigit():
            batches[int(stem)] = name
    return batches


def files_read(checkpoint: Path) -> int:
    """Files the committed batches of a query on ``checkpoint`` took from its file source: the
    entries of Spark's source log (``sources/0/``: one file per planned batch, every tenth a
    ``.compact`` holding all entries so far) up to the last batch in ``commits/`` (a batch
    planned but not committed, such as one refused after a stop, runs again). O(entries since
    the last compaction)."""
    committed = _batch_files(checkpoint / "commits")
    if not committed:
        return 0
    last = max(committed)
    log = checkpoint / "sources" / "0"
    batches = {batch: name for batch, name in _batch_files(log).items() if batch <= last}
    first = max((batch for batch, name in batches.items() if name.endswith(".compact")), default=-1)
    total = 0
    for batch in sorted(batches):
        if batch < first:
            continue
        try:
            lines = (log / batches[batch]).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        total += sum(1 for line in lines[1:] if line.strip())
    return total


def files_waiting(source: Path, checkpoint: Path) -> int:
    """Source files the committed batches of a query on ``checkpoint`` have not read yet.
    O(files in ``source`` + entries since the last compaction)."""
    return max(0, count_files(source) - files_read(checkpoint))
