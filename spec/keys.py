"""Which columns form the sink primary key and the upsert key, and how rows are matched."""

from __future__ import annotations

from dataclasses import dataclass, field

from .changes import Row
from .encoding import canonical, project
from .equalizer import DEFAULT_EQUALIZER, Equalizer


@dataclass(frozen=True)
class Keys:
    """The operator's keys.

    ``pk``: column indexes of the sink primary key (the *context key*; state is kept per
    distinct value). ``upsert_key``: column indexes of the upsert key, or ``()`` for none.
    ``equalizer``: how projections are compared (rule 2).

    The context key is always the canonical encoding of the PK projection (type-aware); the
    equalizer applies to matching inside one context key only.
    """

    pk: tuple[int, ...]
    upsert_key: tuple[int, ...] = ()
    equalizer: Equalizer = field(default=DEFAULT_EQUALIZER)

    def __post_init__(self) -> None:
        if not self.pk:
            raise ValueError("the sink primary key needs at least one column")
        for name, columns in (("pk", self.pk), ("upsert key", self.upsert_key)):
            if len(set(columns)) != len(columns):
                raise ValueError(f"{name} names a column twice: {list(columns)}")
            if any(column < 0 for column in columns):
                raise ValueError(f"{name} columns must be >= 0: {list(columns)}")

    @property
    def has_upsert_key(self) -> bool:
        """True when rows are matched by their upsert-key projection (rules 2 and 4)."""
        return bool(self.upsert_key)

    def context_key(self, row: Row) -> bytes:
        """The canonical encoding of the row's PK projection. IndexError if a column is missing."""
        return canonical(project(row, self.pk))

    def match_key(self, row: Row) -> bytes:
        """Rule 2: two rows match when their match keys are equal.

        With an upsert key: the equalizer's key of the upsert-key projection; without one:
        the equalizer's key of the whole row.
        """
        values = project(row, self.upsert_key) if self.upsert_key else row
        return self.equalizer.normalize(values)

    def max_column(self) -> int:
        """The highest column index the keys use (a row needs more columns than that)."""
        return max((*self.pk, *self.upsert_key))
