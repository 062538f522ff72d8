"""Project-wide test configuration. Hypothesis profiles come from the upsertmat plugin."""

pytest_plugins = ["pytester"]
