"""The failure every check raises: an AssertionError that also carries its counterexample.

The message is what a person reads; the fields let tools (the conformance report) say which
rule of docs/spec.md the failing input exercises, by replaying ``steps`` on the model.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..spec import Granularity, Keys, TtlSettings
from .generators import Step


class Mismatch(AssertionError):
    """An implementation's output differs from the expected one at the last of ``steps``.

    ``steps``: the inputs fed so far, the failing one last (clock advances included);
    ``actual_ops``: the ops the implementation emitted for it; ``ttl``/``granularity``: the
    model configuration the expectation came from (None: no TTL).
    """

    def __init__(
        self,
        message: str,
        *,
        keys: Keys,
        steps: Sequence[Step],
        actual_ops: Sequence[str] = (),
        ttl: TtlSettings | None = None,
        granularity: Granularity = Granularity.PER_ELEMENT,
    ) -> None:
        super().__init__(message)
        self.keys = keys
        self.steps = tuple(steps)
        self.actual_ops = tuple(actual_ops)
        self.ttl = ttl
        self.granularity = granularity
