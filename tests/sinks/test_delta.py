"""The shared sink suite on the Delta Lake sink; read back by replaying the Delta log with pyarrow
(tests/sinks/lakereaders.py), not with deltalake."""

from __future__ import annotations

from pathlib import Path

from ..prerequisites import require_module
from .suite import BatchSinkTests, Row

require_module("deltalake", "deltalake (the 'lakehouse' extra)")
from .lakereaders import delta_rows  # noqa: E402 (after the prerequisite, as after importorskip)


class TestDeltaSink(BatchSinkTests):
    kind_name = "delta"

    def url(self, tmp_path: Path) -> str:
        return f"delta:///{tmp_path / 'table'}"

    def independent_rows(self, url: str, table: str) -> list[Row]:
        return delta_rows(Path(url.removeprefix("delta:///")))
