"""The states of one backend by name: each created on first use, and always of one kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

S = TypeVar("S")


class NamedStates:
    """Hands out the backend's state called ``name``, creating it with ``create(kind)`` once.

    Asking again for a name returns the same object; asking for it as another kind of state
    (a value state named like an existing map state, say) is a ValueError. O(1).
    """

    def __init__(self, create: Callable[[type[Any], str], Any]) -> None:
        self._create = create
        self._states: dict[str, object] = {}

    def get(self, name: str, kind: type[S]) -> S:
        """The state ``name`` of type ``kind``."""
        state = self._states.get(name)
        if state is None:
            state = self._states[name] = self._create(kind, name)
        elif type(state) is not kind:
            raise ValueError(
                f"state {name!r} already exists as a {type(state).__name__}, not a {kind.__name__}"
            )
        return cast(S, state)
