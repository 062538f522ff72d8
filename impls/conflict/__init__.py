"""``ON CONFLICT DO ERROR | DO NOTHING``: the watermark-compacting materializer on every backend.

Selected by ``table.exec.sink.conflict-strategy`` (``Settings.conflict``); the semantics are
rules C1-C6 of docs/spec.md section 9 (model: :mod:`upsertmat.spec.conflict`).
"""

from .materializer import Compacting, CompactingMaterializer, create

__all__ = ["Compacting", "CompactingMaterializer", "create"]
