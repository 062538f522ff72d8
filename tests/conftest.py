"""Project-wide test configuration.

The upsertmat plugin loads a Hypothesis profile only when the conformance suite is selected;
this project's own property tests use the same profiles: ``HYPOTHESIS_PROFILE`` (tox sets
``upsertmat-ci``), else ``upsertmat-dev``.
"""

import os

from hypothesis import settings

from upsertmat.conformance import profiles

pytest_plugins = ["pytester"]

settings.load_profile(profiles.resolve(os.environ.get("HYPOTHESIS_PROFILE") or profiles.DEV))
