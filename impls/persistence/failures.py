"""What a materializer's state raises, as the persistence layer's errors naming the directory.

Shared by the transactions over a state directory (:mod:`.restore`, :mod:`.savepoint`): a
storage failure (a full disk, a device error) becomes a :class:`~.errors.StateDirIOError`
(exit 4 on the command line), anything else the storage engine reports a
:class:`~.errors.StateDirError` naming the directory once (exit 3). ``OSError`` passes through
untouched: it comes from the files the transaction writes itself, not from the state.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ...spec import Materializer
from ..state.errors import StateError, StorageError, storage_failure
from .errors import StateDirError, StateDirIOError

AGAIN = "run the same command again"


@contextlib.contextmanager
def classified(materializer: Materializer, path: Path, then: str = AGAIN) -> Iterator[None]:
    """Turn what the state of ``materializer`` (in ``path``) raises into persistence errors:
    a storage engine's own error classified first (:func:`storage_failure`); ``then`` says
    what to do after a storage failure."""
    try:
        yield
    except StateError as error:
        raise state_dir_error(error, path, then) from None
    except OSError:
        raise
    except Exception as error:
        failure = storage_failure(getattr(materializer, "backend", None), error)
        if failure is None:
            raise
        raise state_dir_error(failure, path, then) from None


def state_dir_error(error: StateError, path: Path, then: str = AGAIN) -> StateDirError:
    """``error`` of the state in ``path``: a storage failure a StateDirIOError, anything else
    a StateDirError whose message names ``path`` (once)."""
    if isinstance(error, StorageError):
        return StateDirIOError(f"{error}; free space (or fix the device) and {then}")
    message = str(error)
    if f"{path}{os.sep}" not in message and f"{path} " not in message:  # name the directory once
        message = f"{path}: {message}"
    return StateDirError(message)


def close_quietly(materializer: Materializer, what: str) -> str | None:
    """Close ``materializer`` after its last commit: a storage failure is a warning returned
    (``closing the state failed (...); {what}``: what was committed is safe), None if it
    closed; anything else propagates (a bug)."""
    try:
        materializer.close()
    except Exception as error:
        failure = storage_failure(getattr(materializer, "backend", None), error)
        if failure is None:
            raise
        return f"closing the state failed ({failure}); {what}"
    return None
