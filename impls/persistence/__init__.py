"""How state reaches disk: the one persistence layer of upsertmat (I/O only, no CLI).

- :mod:`.statedir`: the state directory (lock, manifest, heap snapshots), written atomically.
- :mod:`.recovery`: the committed stream position (inside a byte backend's database, with
  the state).
- :mod:`.inputs`: what of an input a run has applied (count and SHA-256 of the applied
  lines' bytes), and telling a rerun from a continuation.
- :mod:`.session`: :class:`StateSession`, the API the front ends use: open a directory with
  keys and settings (or take them from it), attach a materializer (state loaded, position
  found), open an input against it (where to resume), commit what was applied, finish a
  run, seal a restored state.
- :mod:`.errors`: what a refused directory raises.

File primitives (atomic writes, directory fsync, the lock, regular-file reads) are in
:mod:`upsertmat.impls.state.files` and :mod:`upsertmat.impls.state.locking`, shared with the
byte backends' own directories; savepoints are in :mod:`upsertmat.impls.lifecycle`.
"""

from __future__ import annotations

from ..documents import RunRecord
from .errors import StateDirError, StateDirWriteError, UnsupportedStateDir
from .inputs import EMPTY_SHA256, AppliedInput
from .recovery import Position, PositionRecord
from .session import Applied, Rerun, RunStart, StateSession
from .statedir import DEAD_LETTER_NAME, MANIFEST_NAME, Manifest, StateDir

__all__ = [
    "DEAD_LETTER_NAME",
    "EMPTY_SHA256",
    "MANIFEST_NAME",
    "Applied",
    "AppliedInput",
    "Manifest",
    "Position",
    "PositionRecord",
    "Rerun",
    "RunRecord",
    "RunStart",
    "StateDir",
    "StateDirError",
    "StateDirWriteError",
    "StateSession",
    "UnsupportedStateDir",
]
