"""Errors of the keyed-state layer; every message names the state directory or state involved."""

from __future__ import annotations


class StateError(RuntimeError):
    """Base class of keyed-state errors."""


class StateLockedError(StateError):
    """The state directory is in use by another backend (this or another process)."""


class CorruptStateError(StateError):
    """Stored state cannot be read: a damaged, foreign or incompatible state directory or value."""


class BackendUnavailableError(StateError):
    """The selected backend cannot be opened in this environment or for this request."""


class StorageError(StateError):
    """The storage engine failed while the state was in use (an I/O error, a full disk).

    The state is as of the last commit: nothing of the failed input (or commit interval) is
    applied. Freeing space (or fixing the device) and resuming from the last commit is safe.
    """


class StorageFullError(StorageError):
    """No space left for the state."""


def storage_failure(backend: object, error: BaseException) -> StateError | None:
    """``error`` (raised by ``backend``'s storage engine) as a classified :class:`StateError`,
    or None when it is not a storage failure (a bug, an interrupt, ...).

    Backends that can tell define ``classify(error)``; errors that already are StateErrors are
    returned as they are.
    """
    if isinstance(error, StateError):
        return error
    classify = getattr(backend, "classify", None)
    if classify is None or not isinstance(error, Exception):
        return None
    failure: StateError | None = classify(error)
    return failure
