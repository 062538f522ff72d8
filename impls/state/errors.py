"""Errors of the keyed-state layer; every message names the state directory or state involved."""

from __future__ import annotations

import errno


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


_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_DEVICE = frozenset({errno.EIO, errno.EROFS, errno.ENXIO, errno.ENODEV, errno.ESTALE})


def os_failure(error: OSError, what: str) -> StateError:
    """An OSError of the file system under the state, said as ``WHAT: reason`` and classified
    by its errno: no space (:class:`StorageFullError`), a device failure (:class:`StorageError`),
    anything else (a permission, a path that is not a directory) a plain :class:`StateError`:
    the state is refused as it is."""
    text = f"{what}: {error.strerror or error}"
    if error.errno in _FULL:
        return StorageFullError(text)
    if error.errno in _DEVICE:
        return StorageError(text)
    return StateError(text)


def classified(backend: object, error: BaseException) -> BaseException:
    """``error`` as :func:`storage_failure` classifies it, or ``error`` itself."""
    failure = storage_failure(backend, error)
    return error if failure is None else failure
