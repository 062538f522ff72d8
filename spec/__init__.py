"""upsertmat.spec — the executable specification of sink upsert materialization.

Types (:class:`Change`, :class:`RowKind`, rows as tuples of JSON values), the equalizer
abstraction, the operator's :class:`Keys`, the :class:`Materializer` contract and the
reference model :class:`ModelMaterializer`. Nothing here imports the rest of the project.
"""

from .changes import Change, Row, RowKind, delete, insert, update_after, update_before
from .conflict import (
    Conflict,
    ConflictBehavior,
    ConflictError,
    ConflictModel,
    PendingChange,
    buffer_change,
    compact,
    fold,
    run_conflict_model,
)
from .contract import (
    BatchProcessing,
    Element,
    HistoryAccess,
    Materializer,
    MissExplaining,
    StateTransfer,
    Unsupported,
    process_many,
)
from .encoding import JsonValue, canonical, project
from .equalizer import (
    DEFAULT_EQUALIZER,
    CanonicalEqualizer,
    CaseInsensitiveEqualizer,
    Equalizer,
    IgnoreColumnsEqualizer,
    equalizer_spec,
    parse_equalizer,
)
from .keys import Keys
from .misses import Candidate, ColumnDiff, MissCause, MissExplanation, explain_miss
from .model import ModelMaterializer, apply_to_elements, apply_to_history, run_model
from .ttl import Granularity, MissingTimestampError, TimeDomain, TtlSettings, UpdateType

__all__ = [
    "DEFAULT_EQUALIZER",
    "BatchProcessing",
    "Candidate",
    "CanonicalEqualizer",
    "CaseInsensitiveEqualizer",
    "Change",
    "ColumnDiff",
    "Conflict",
    "ConflictBehavior",
    "ConflictError",
    "ConflictModel",
    "Element",
    "Equalizer",
    "Granularity",
    "HistoryAccess",
    "IgnoreColumnsEqualizer",
    "JsonValue",
    "Keys",
    "Materializer",
    "MissCause",
    "MissExplaining",
    "MissExplanation",
    "MissingTimestampError",
    "ModelMaterializer",
    "PendingChange",
    "Row",
    "RowKind",
    "StateTransfer",
    "TimeDomain",
    "TtlSettings",
    "Unsupported",
    "UpdateType",
    "apply_to_elements",
    "apply_to_history",
    "buffer_change",
    "canonical",
    "compact",
    "delete",
    "equalizer_spec",
    "explain_miss",
    "fold",
    "insert",
    "parse_equalizer",
    "process_many",
    "project",
    "run_conflict_model",
    "run_model",
    "update_after",
    "update_before",
]
