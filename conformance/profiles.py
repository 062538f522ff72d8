"""The suite's Hypothesis profiles, namespaced so they never clash with a project's own.

Importing this module registers (never loads) three profiles:

- ``upsertmat-dev``: 25 examples, no deadline (the default when the suite is selected);
- ``upsertmat-ci``: 100 examples, ``derandomize=True``, no deadline, no example database,
  ``print_blob=True``;
- ``upsertmat-nightly``: 2000 examples, no deadline.

``dev`` and ``ci`` leave out Hypothesis's *explain* phase: after shrinking it re-runs the failing
example under coverage tracing to list the lines only failing examples run, which cost 45 s of
CPU for one failing state machine (of 50 s in all); the suite's failure names the rule broken and
every input instead. ``nightly`` keeps it.

The pytest plugin loads one only when the suite is selected (``--upsertmat-impl``,
``--upsertmat-cmd`` or a collected ``MaterializerTests``/``StateBackendTests`` subclass): see
:func:`choose`.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

DEV = "upsertmat-dev"
CI = "upsertmat-ci"
NIGHTLY = "upsertmat-nightly"
NAMES = (DEV, CI, NIGHTLY)
NO_EXPLAIN = tuple(phase for phase in Phase if phase is not Phase.explain)

settings.register_profile(DEV, max_examples=25, deadline=None, phases=NO_EXPLAIN)
settings.register_profile(
    CI,
    max_examples=100,
    phases=NO_EXPLAIN,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    NIGHTLY, max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def resolve(name: str) -> str:
    """The registered profile ``name`` names: itself, or ``upsertmat-NAME`` for the short names
    ``dev``/``ci``/``nightly`` when no profile of that name is registered. Raises
    ``hypothesis.errors.InvalidArgument`` for an unknown name."""
    for candidate in (name, f"upsertmat-{name}"):
        try:
            settings.get_profile(candidate)
        except Exception:
            continue
        return candidate
    settings.get_profile(name)  # raises with Hypothesis's own message
    return name


def choose(requested: str | None) -> str | None:
    """The profile to load when the suite is selected, or None to keep the current one.

    ``requested`` (the ``HYPOTHESIS_PROFILE`` environment variable) wins; otherwise
    ``upsertmat-dev`` when Hypothesis's ``default`` profile is loaded, ``upsertmat-ci`` when its
    built-in ``ci`` profile is (Hypothesis loads that one itself on CI systems), else None: a
    profile of the user's own (e.g. ``--hypothesis-profile``) is kept.
    """
    if requested:
        return resolve(requested)
    current = settings.get_current_profile_name()
    if current == "default":
        return DEV
    if current == "ci":  # Hypothesis loads its own "ci" profile when it detects a CI system
        return CI
    return None


def load(requested: str | None) -> str:
    """Load :func:`choose`'s profile; return the name of the profile now in effect."""
    name = choose(requested)
    if name is not None:
        settings.load_profile(name)
    return settings.get_current_profile_name()
