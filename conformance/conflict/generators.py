"""Hypothesis strategies for ON CONFLICT streams: generated changelogs with watermark lines.

:func:`watermarked_streams` takes any stream of :mod:`.generators` (valid, upsert-style or
tolerated by default) and puts watermark lines between its changes: mostly none, sometimes
a newer watermark, sometimes a repeated or older time (which must change nothing, rule C2).
Shrinking removes watermarks (everything compacts at the end) and simplifies the stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from ...spec import Change, Keys
from ..generators import GeneratedStream, bare_update_streams, tolerated_streams, valid_streams

Line = Change | int


@dataclass(frozen=True)
class WatermarkedStream:
    """Keys and lines (a change, or an ``int`` watermark)."""

    keys: Keys
    lines: tuple[Line, ...]

    def __repr__(self) -> str:
        body = ", ".join(repr(line) for line in self.lines)
        return f"WatermarkedStream(keys={self.keys!r}, lines=[{body}])"


# What precedes a change: nothing (most often), a newer watermark, the same time, an older one.
_NONE, _NEWER, _SAME, _OLDER = range(4)


@st.composite
def watermarked_streams(
    draw: st.DrawFn, base: st.SearchStrategy[GeneratedStream] | None = None
) -> WatermarkedStream:
    """A generated stream with watermark lines drawn between its changes (see module docstring)."""
    stream = draw(
        base if base is not None else st.one_of(valid_streams(), bare_update_streams(), tolerated_streams())
    )
    clock = 0
    lines: list[Line] = []
    gaps = st.sampled_from((_NONE, _NONE, _NONE, _NEWER, _NEWER, _SAME, _OLDER))
    for change in stream.arrival:
        gap = draw(gaps)
        if gap == _NEWER:
            clock += draw(st.integers(1, 3))
            lines.append(clock)
        elif gap == _SAME:
            lines.append(clock)
        elif gap == _OLDER:
            lines.append(clock - draw(st.integers(1, 3)))
        lines.append(change)
    if draw(st.booleans()):
        lines.append(clock + 1)
    return WatermarkedStream(stream.keys, tuple(lines))
