"""Errors of the state lifecycle (checkpoints, savepoints, migration, rescaling)."""

from __future__ import annotations


class SavepointError(ValueError):
    """A savepoint cannot be written or used; the message names the file and what differs."""


class SavepointMismatch(SavepointError):
    """A valid savepoint that does not fit the restore target (keys, equalizer, TTL)."""


class SavepointIOError(SavepointError):
    """Reading or writing a savepoint's files failed in the file system (a full disk, an I/O
    error): nothing is known to be wrong with the savepoint itself."""
