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
