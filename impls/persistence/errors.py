"""Errors of a state directory: every message names the file or directory and what to do.

These are not storage-engine errors (:mod:`upsertmat.impls.state.errors`): they describe the
directory as a whole, and front ends report them as they are (the command line: exit code 3,
4 for :class:`StateDirIOError` and :class:`StateDirWriteError`, 2 for
:class:`UnsupportedStateDir`).
"""

from __future__ import annotations


class StateDirError(Exception):
    """A state directory is refused: locked, not matching this run, damaged or unusable."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class StateDirIOError(StateDirError):
    """The file system under the state directory failed (a full disk, an I/O error): nothing
    is wrong with the directory itself; free space (or fix the device) and run again."""


class StateDirWriteError(StateDirIOError):
    """Writing a file of the state directory failed (a full disk, an I/O error); the directory
    is left at its last commit."""


class UnsupportedStateDir(StateDirError):
    """The selected implementation cannot keep its state in a state directory (a request the
    caller can change, not a problem of the directory)."""
