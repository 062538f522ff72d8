"""The demo's data: a join whose output is shuffled by a non-key column, so updates arrive out of order.

The upstream query is ``SELECT u.id, u.level, l.badge FROM users u JOIN levels l ON u.level =
l.level`` into a sink keyed by ``id``. The join runs in ``channels`` parallel tasks partitioned by
its join key ``level`` (not the sink key). When user 7 moves from level 2 to level 3 the join emits
``-U(7, 2, silver)`` from level 2's task and ``+U(7, 3, gold)`` from level 3's task; the two
travel on different channels and may reach the sink in either order. A sink that applies them
blindly deletes user 7.

:func:`generate` builds the *logical* changelog (what a single-task join emits, in order) from
seeded user events (sign-ups, level changes, badge renames, deletions), routes every change to
the channel of its row's level (an ADD and its own RETRACT carry the same row, hence travel on
the same channel), and merges the channels in seeded bursts, preserving each channel's order.
The result numbers the arrivals (``seq``): that is the source file. O(changes).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

COLUMNS = ("id", "level", "badge")
BADGES = ("bronze", "silver", "gold", "platinum", "diamond", "ruby", "jade", "onyx")


@dataclass(frozen=True)
class DemoChange:
    """One change of the join's output: ``op`` and the row ``(id, level, badge)``."""

    op: str
    id: int
    level: int
    badge: str

    @property
    def row(self) -> tuple[int, int, str]:
        """The row as a tuple in column order."""
        return (self.id, self.level, self.badge)


@dataclass(frozen=True)
class DemoData:
    """The logical changelog, the arrival order at the sink, and the channel of every arrival."""

    logical: tuple[DemoChange, ...]
    arrival: tuple[DemoChange, ...]
    channels: tuple[int, ...]


@dataclass(frozen=True)
class DemoShape:
    """How much data: users, levels (join keys), parallel channels, user events, burst length, seed."""

    users: int = 40
    levels: int = 6
    channels: int = 4
    events: int = 300
    max_burst: int = 6
    seed: int = 7

    def __post_init__(self) -> None:
        for name in ("users", "levels", "channels", "events", "max_burst"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.levels < 2:
            raise ValueError("levels must be at least 2 (a level change needs two levels)")


def logical_changelog(shape: DemoShape, rng: random.Random) -> list[DemoChange]:
    """The join's output in logical order for seeded user and level events.

    Every user signs up first (``+I``); then ``shape.events`` events: mostly level changes
    (``-U`` old, ``+U`` new), some badge renames of a level (``-U``/``+U`` for each of its
    users), some deletions (``-D``) and re-sign-ups (``+I``).
    """
    badges = {level: BADGES[level % len(BADGES)] for level in range(shape.levels)}
    level_of: dict[int, int] = {}
    out: list[DemoChange] = []
    for user in range(1, shape.users + 1):
        level_of[user] = rng.randrange(shape.levels)
        out.append(DemoChange("+I", user, level_of[user], badges[level_of[user]]))
    for _ in range(shape.events):
        roll = rng.random()
        user = rng.randrange(1, shape.users + 1)
        if roll < 0.05:  # a level's badge is renamed: every user on it is updated
            level = rng.randrange(shape.levels)
            old, new = badges[level], f"{BADGES[rng.randrange(len(BADGES))]}-{rng.randrange(100)}"
            badges[level] = new
            for member in sorted(u for u, lv in level_of.items() if lv == level):
                out.append(DemoChange("-U", member, level, old))
                out.append(DemoChange("+U", member, level, new))
        elif roll < 0.10 and user in level_of:  # the user leaves
            level = level_of.pop(user)
            out.append(DemoChange("-D", user, level, badges[level]))
        elif user not in level_of:  # the user comes back
            level_of[user] = rng.randrange(shape.levels)
            out.append(DemoChange("+I", user, level_of[user], badges[level_of[user]]))
        else:  # the user moves to another level
            old_level = level_of[user]
            new_level = (old_level + rng.randrange(1, shape.levels)) % shape.levels
            level_of[user] = new_level
            out.append(DemoChange("-U", user, old_level, badges[old_level]))
            out.append(DemoChange("+U", user, new_level, badges[new_level]))
    return out


def shuffle_by_level(
    logical: list[DemoChange], shape: DemoShape, rng: random.Random
) -> tuple[list[DemoChange], list[int]]:
    """Route each change to channel ``level % channels``; merge the channels in random bursts.

    Each channel's order is preserved (a network channel is FIFO); the merge picks a non-empty
    channel at random and takes 1..``max_burst`` changes from it. Returns the arrivals and the
    channel of each.
    """
    queues: list[list[DemoChange]] = [[] for _ in range(shape.channels)]
    for change in logical:
        queues[change.level % shape.channels].append(change)
    heads = [0] * shape.channels
    arrival: list[DemoChange] = []
    channels: list[int] = []
    while True:
        open_channels = [c for c in range(shape.channels) if heads[c] < len(queues[c])]
        if not open_channels:
            return arrival, channels
        channel = rng.choice(open_channels)
        take = min(rng.randint(1, shape.max_burst), len(queues[channel]) - heads[channel])
        arrival.extend(queues[channel][heads[channel] : heads[channel] + take])
        channels.extend([channel] * take)
        heads[channel] += take


def generate(shape: DemoShape | None = None) -> DemoData:
    """The demo's data for a shape (default :class:`DemoShape`); deterministic for a seed."""
    shape = shape or DemoShape()
    rng = random.Random(shape.seed)
    logical = logical_changelog(shape, rng)
    arrival, channels = shuffle_by_level(logical, shape, rng)
    return DemoData(tuple(logical), tuple(arrival), tuple(channels))


def write_source(data: DemoData, directory: Path, name: str = "changes.jsonl") -> Path:
    """Write the arrivals as JSON Lines ``{"seq", "op", "id", "level", "badge"}`` into ``directory``.

    The file is written under a temporary name and renamed in, so a streaming source never
    sees half of it. Returns the file's path.
    """
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / name
    partial = directory / f".{name}.partial"
    with partial.open("w", encoding="utf-8") as out:
        for seq, change in enumerate(data.arrival):
            record = {
                "seq": seq,
                "op": change.op,
                "id": change.id,
                "level": change.level,
                "badge": change.badge,
            }
            out.write(json.dumps(record) + "\n")
    partial.rename(target)
    return target
