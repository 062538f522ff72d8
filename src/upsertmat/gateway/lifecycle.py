"""A gateway job's states and the events that move it, as data (in the style of h11's tables).

:data:`TRANSITIONS` maps ``(state, event)`` to the next state; the registry applies an event
only through it (:meth:`upsertmat.gateway.registry.Registry.transition`), in the same
transaction that reads the current state, and refuses any other pair (:class:`BadTransition`).
:data:`WANTED` says what an event makes the user's wish (``wanted``): a job the gateway restarts
after its own restart is one whose wish is ``RUNNING``.

Submitted, a job is ``STARTING``; ``started`` makes it ``RUNNING``; ``stop`` makes a starting
or running job ``STOPPING`` and ``ended`` then ``STOPPED``; ``failed`` makes any active job
``FAILED``; ``restart`` makes a stopped or failed job ``STARTING`` again (on its checkpoint).
``resume``: the gateway starts again and the job's wish is ``RUNNING``; ``lost``: it starts
again and the job was not wanted running (it stopped with the gateway). ``delete`` ends a
stopped or failed job (the registry forgets it).
"""

from __future__ import annotations

import enum
from typing import Final


class JobState(enum.Enum):
    """What a job is."""

    STARTING = "STARTING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    DELETED = "DELETED"


class Event(enum.Enum):
    """What happens to a job."""

    STARTED = "started"  # its query runs
    STOP = "stop"  # a user asked it to stop (at a micro-batch boundary)
    ENDED = "ended"  # its query ended after a stop
    FAILED = "failed"  # its query (or its start) failed
    RESTART = "restart"  # a user asked a stopped or failed job to run again
    RESUME = "resume"  # the gateway started again and the job is wanted running
    LOST = "lost"  # the gateway started again and the job is not wanted running
    DELETE = "delete"  # a user deleted a stopped or failed job


S, E = JobState, Event

TRANSITIONS: Final[dict[tuple[JobState, Event], JobState]] = {
    (S.STARTING, E.STARTED): S.RUNNING,
    (S.STARTING, E.STOP): S.STOPPING,
    (S.STARTING, E.FAILED): S.FAILED,
    (S.STARTING, E.RESUME): S.STARTING,
    (S.STARTING, E.LOST): S.STOPPED,
    (S.RUNNING, E.STOP): S.STOPPING,
    (S.RUNNING, E.FAILED): S.FAILED,
    (S.RUNNING, E.RESUME): S.STARTING,
    (S.RUNNING, E.LOST): S.STOPPED,
    (S.STOPPING, E.STARTED): S.STOPPING,  # the query came up while the stop was asked: it stops
    (S.STOPPING, E.ENDED): S.STOPPED,
    (S.STOPPING, E.FAILED): S.FAILED,
    (S.STOPPING, E.LOST): S.STOPPED,
    (S.STOPPED, E.RESTART): S.STARTING,
    (S.STOPPED, E.DELETE): S.DELETED,
    (S.FAILED, E.RESTART): S.STARTING,
    (S.FAILED, E.DELETE): S.DELETED,
}
"""Every allowed transition; nothing else is."""

WANTED: Final[dict[Event, str]] = {
    E.STOP: "STOPPED",
    E.FAILED: "STOPPED",
    E.RESTART: "RUNNING",
}
"""The user's wish after an event (events not listed leave it as it is)."""

ACTIVE: Final = frozenset({S.STARTING, S.RUNNING, S.STOPPING})
"""States in which a job holds a query (or is about to): they count against ``max-jobs``."""
TERMINAL: Final = frozenset({S.STOPPED, S.FAILED})
"""States in which no query runs; a job can be restarted or deleted from them."""


WHAT_TO_DO: Final[dict[Event, str]] = {
    E.STOP: "there is nothing to stop",
    E.RESTART: "stop it first (POST /v1/jobs/{job}/stop, or upsertmat client stop {job}), then restart it",
    E.DELETE: "stop it first (POST /v1/jobs/{job}/stop, or upsertmat client stop {job}), then delete it",
    E.STARTED: "its query's start is not recorded (it was stopped or deleted meanwhile)",
    E.ENDED: "its query's end is not recorded (it was not stopping)",
    E.FAILED: "its query's failure is not recorded (it was not running)",
    E.RESUME: "it is not resumed (it was not running when the gateway stopped)",
    E.LOST: "it is not marked stopped (it was not running when the gateway stopped)",
}
"""What a refused event means to the user, and what to do instead ("{job}": the job's id)."""

WHILE_STOPPING: Final = "wait until it is STOPPED (its last batch is committing), then {what} it"


def refusal(job_id: str, state: JobState, event: Event) -> str:
    """The message of a refused event, in the user's words: the job's state and what to do."""
    if state is S.STOPPING and event in (E.RESTART, E.DELETE):
        advice = WHILE_STOPPING.format(what=event.value)
    elif state is S.STOPPING and event is E.STOP:
        advice = "it stops at its next micro-batch boundary already"
    else:
        advice = WHAT_TO_DO[event].format(job=job_id)
    return f"job {job_id} is {state.value}: {advice}"


class BadTransition(ValueError):
    """An event that the job's current state does not allow (its message: :func:`refusal`)."""

    def __init__(self, job_id: str, state: JobState, event: Event) -> None:
        super().__init__(refusal(job_id, state, event))
        self.job_id = job_id
        self.state = state
        self.event = event


def next_state(job_id: str, state: JobState, event: Event) -> JobState:
    """The state after ``event``; BadTransition if the table has no such pair. O(1)."""
    found = TRANSITIONS.get((state, event))
    if found is None:
        raise BadTransition(job_id, state, event)
    return found
