"""upsertmat.impls.lifecycle — checkpoints, savepoints, migration and rescaling.

- :mod:`.transfer`: export/import any implementation's state (StateTransfer, else HistoryAccess).
- :mod:`.keygroups`: context key -> key group -> operator instance (rescaling).
- :mod:`.savepoint`: the canonical savepoint directory (write, validate, restore).
- :mod:`.checkpoint`: in-memory checkpoints, migration and rescaling of live instances.
"""

from .checkpoint import Checkpoint, migrate, rescale, restore_checkpoint, take_checkpoint
from .errors import SavepointError, SavepointMismatch
from .keygroups import (
    DEFAULT_MAX_PARALLELISM,
    MAX_MAX_PARALLELISM,
    Partition,
    key_group,
    key_group_range,
    operator_index,
    route,
)
from .savepoint import (
    Savepoint,
    SavepointManifest,
    load_savepoint,
    read_manifest,
    save_savepoint,
    write_savepoint,
)
from .transfer import NotTransferable, clock_of, export_state, import_state, supports_transfer

__all__ = [
    "DEFAULT_MAX_PARALLELISM",
    "MAX_MAX_PARALLELISM",
    "Checkpoint",
    "NotTransferable",
    "Partition",
    "Savepoint",
    "SavepointError",
    "SavepointManifest",
    "SavepointMismatch",
    "clock_of",
    "export_state",
    "import_state",
    "key_group",
    "key_group_range",
    "load_savepoint",
    "migrate",
    "operator_index",
    "read_manifest",
    "rescale",
    "restore_checkpoint",
    "route",
    "save_savepoint",
    "supports_transfer",
    "take_checkpoint",
    "write_savepoint",
]
