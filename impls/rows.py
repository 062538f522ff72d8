"""The type of a row as the implementations hold it.

An input's row is the tuple its ``Change`` carries, but a row read back from a byte backend is
the list msgpack decodes (msgpack has one array type), and outputs convert where it matters
(``tuple(...)`` of a stored row). Layout code therefore annotates rows as :data:`StoredRow`,
not as the spec's ``Row`` (``tuple``): the compiled build (setup.py, mypyc) checks a declared
``tuple`` at run time and would refuse the lists.
"""

from __future__ import annotations

from typing import Any, TypeAlias

StoredRow: TypeAlias = Any
"""A row: a tuple (an input's) or a list (decoded from a byte backend). Any sequence of JSON
values; the spec's ``Row`` where a tuple is guaranteed."""

MatchKey: TypeAlias = Any
"""A match key as a layout keeps it: the canonical bytes of rule 2, or, in the heap layouts
(where nothing is stored at rest), the *token* of those bytes
(:meth:`~upsertmat.impls.encoding.KeyEncoder.use_tokens`): the int ``n`` for the bytes
``[n]`` of a one-column key, else the bytes themselves. Two tokens are equal exactly when
their bytes are."""
