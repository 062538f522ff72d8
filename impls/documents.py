"""Checked reads of the JSON documents upsertmat writes next to state (manifests).

A state directory's manifest and a savepoint's manifest are JSON objects read back from disk,
possibly damaged or hostile. Both are validated field by field through :class:`Fields`, so a
field of one kind is checked the same way (and refused with the same words) in both: the
first deviation raises the caller's error, built by its ``bad(what)`` from a message such as
``'lines' must be a non-negative integer``. Booleans are never integers here, and an integer
is at most :data:`MAX_INTEGER` unless a field says less (what state stores is 64-bit: a
larger count, clock or TTL would fail, or hang, only later, where it is used). The records
both carry (:class:`RunRecord`, TTL settings) are read here too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TypeGuard

from ..spec import TimeDomain, TtlSettings, UpdateType
from .settings import MAX_TIME_MS

MAX_INTEGER = (1 << 63) - 1
"""The largest integer a field holds unless it says less: a signed 64-bit integer."""


def json_type_name(value: object) -> str:
    """A short name of a JSON value's type, for error messages (``"an array"``, ``"null"``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction or exponent"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def is_integer(value: object) -> TypeGuard[int]:
    """True for an ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_natural(value: object, minimum: int = 0) -> bool:
    """True for an ``int`` (not a ``bool``) of at least ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def ttl_settings_of(record: object, shape: str) -> TtlSettings:
    """TTL settings from their JSON record ``{ttl_ms, time_domain, update_type}``; ValueError
    (``shape`` when the record is not of that shape) otherwise. ``ttl_ms`` is at most
    :data:`~upsertmat.impls.settings.MAX_TIME_MS`."""
    if not (
        isinstance(record, dict)
        and set(record) == {"ttl_ms", "time_domain", "update_type"}
        and is_natural(record["ttl_ms"])
    ):
        raise ValueError(shape)
    if record["ttl_ms"] > MAX_TIME_MS:
        raise ValueError(f"'ttl': 'ttl_ms' must be at most {MAX_TIME_MS} (2**62 - 1 ms)")
    try:
        return TtlSettings(
            record["ttl_ms"], TimeDomain(record["time_domain"]), UpdateType(record["update_type"])
        )
    except ValueError:
        raise ValueError("'ttl' has an unknown time domain or update type") from None


def check_header(
    data: object,
    format_name: str,
    version: int,
    foreign: Callable[[], Exception],
    unsupported: Callable[[object], Exception],
) -> dict[str, Any]:
    """``data`` as a dict if it is an object of ``format_name`` at ``version``.

    Raises ``foreign()`` for anything else than such an object, ``unsupported(found)`` for
    another version (the message should name both versions).
    """
    if not isinstance(data, dict) or data.get("format") != format_name:
        raise foreign()
    if data.get("version") != version:
        raise unsupported(data.get("version"))
    return data


class Fields:
    """Typed reads of the fields of one JSON object; ``bad(what)`` builds the error raised."""

    def __init__(self, data: dict[str, Any], bad: Callable[[str], Exception]) -> None:
        self.data = data
        self.bad = bad

    def natural(
        self,
        name: str,
        *,
        minimum: int = 0,
        maximum: int = MAX_INTEGER,
        nullable: bool = False,
        default: object = None,
    ) -> Any:
        """An integer from ``minimum`` to ``maximum`` (None allowed when ``nullable``;
        ``default`` when absent and not None)."""
        value = self.data.get(name, default)
        if value is None and nullable:
            return None
        if not is_natural(value, minimum):
            what = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
            if minimum == 1:
                what = "a positive integer"
            raise self.bad(f"{name!r} must be {what}{' or null' if nullable else ''}")
        if value > maximum:
            raise self.bad(f"{name!r} must be at most {maximum}, got {_shown(value)}")
        return value

    def integer(self, name: str, *, nullable: bool = False) -> Any:
        """An integer of magnitude at most :data:`MAX_INTEGER`, negative ones included (None
        allowed when ``nullable``)."""
        value = self.data.get(name)
        if value is None and nullable:
            return None
        if not is_integer(value):
            raise self.bad(f"{name!r} must be an integer{' or null' if nullable else ''}")
        if abs(value) > MAX_INTEGER:
            raise self.bad(f"{name!r} must be of magnitude at most {MAX_INTEGER}, got {_shown(value)}")
        return value

    def text(self, name: str, *, nullable: bool = False) -> Any:
        """A string (or None when ``nullable``)."""
        value = self.data.get(name)
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            raise self.bad(f"{name!r} must be a string{' or null' if nullable else ''}")
        return value

    def flag(self, name: str) -> bool:
        """``true`` or ``false``."""
        value = self.data.get(name)
        if not isinstance(value, bool):
            raise self.bad(f"{name!r} must be true or false")
        return value

    def columns(self, name: str, *, non_empty: bool = False) -> tuple[int, ...]:
        """A list of column indexes (non-negative integers)."""
        value = self.data.get(name)
        if not isinstance(value, list) or not all(is_natural(column) for column in value):
            raise self.bad(f"{name!r} must be a list of integers")
        if non_empty and not value:
            raise self.bad(f"{name!r} is empty")
        return tuple(value)

    def mapping(self, name: str) -> dict[str, Any]:
        """A JSON object."""
        value = self.data.get(name)
        if not isinstance(value, dict):
            raise self.bad(f"{name!r} must be an object")
        return value

    def sequence(self, name: str, *, default: list[Any] | None = None) -> list[Any]:
        """A JSON array (``default`` when absent and not None)."""
        value = self.data.get(name, default)
        if not isinstance(value, list):
            raise self.bad(f"{name!r} must be a list")
        return value


def _shown(value: int) -> str:
    """An out-of-range integer for a message: itself, or its size when it is very long."""
    return str(value) if value.bit_length() <= 256 else f"an integer of {value.bit_length()} bits"


@dataclass(frozen=True)
class RunRecord:
    """One completed run of ``replay --state-dir``: its input's identity and the stream lines
    it applied (kept in a state directory's manifest and carried by a savepoint).

    ``first_line`` is the stream index (``in``) of its first line, ``lines`` how many lines it
    consumed; ``input_bytes`` and ``input_sha256`` identify the whole input it consumed.
    """

    run: int
    first_line: int
    lines: int
    input: str
    input_bytes: int
    input_sha256: str

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> RunRecord:
        """Validate and build; ValueError naming the deviation."""
        if not isinstance(data, dict) or set(data) != set(cls.__dataclass_fields__):
            raise ValueError(
                f"a 'runs' entry must have exactly the fields {', '.join(cls.__dataclass_fields__)}"
            )
        read = Fields(data, lambda what: ValueError(f"a 'runs' entry's {what}"))
        return cls(
            run=read.natural("run"),
            first_line=read.natural("first_line"),
            lines=read.natural("lines"),
            input=read.text("input"),
            input_bytes=read.natural("input_bytes"),
            input_sha256=read.text("input_sha256"),
        )


def runs_of(records: list[Any], bad: Callable[[str], Exception]) -> tuple[RunRecord, ...]:
    """The completed runs of a ``runs`` list; ``bad(what)`` for the first invalid entry."""
    try:
        return tuple(RunRecord.from_json(run) for run in records)
    except ValueError as error:
        raise bad(str(error)) from None
