"""The shared sink suite on the Iceberg sink (its SQL catalog on SQLite); read back from the
catalog's metadata, manifests and data files with fastavro and pyarrow (tests/sinks/lakereaders.py),
not with pyiceberg."""

from __future__ import annotations

from pathlib import Path

from ..prerequisites import require_module
from .suite import BatchSinkTests, Row

require_module("pyiceberg", "pyiceberg (the 'lakehouse' extra)")
from .lakereaders import iceberg_rows  # noqa: E402 (after the prerequisite, as after importorskip)


class TestIcebergSink(BatchSinkTests):
    kind_name = "iceberg"

    def url(self, tmp_path: Path) -> str:
        return f"iceberg:///{tmp_path / 'warehouse'}"

    def independent_rows(self, url: str, table: str) -> list[Row]:
        return iceberg_rows(Path(url.removeprefix("iceberg:///")), table)
