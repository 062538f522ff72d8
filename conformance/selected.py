"""The conformance suite bound to ``--upsertmat-impl``/``--upsertmat-cmd`` (collected by the plugin).

Not a ``test_*`` file, so pytest only collects it when the plugin adds it for that option.
"""

from __future__ import annotations

import pytest

from ..spec import Granularity
from .plugin import selected_command, selected_granularity, selected_implementation
from .suite import MaterializerTests


@pytest.fixture(autouse=True, scope="class")
def _select_implementation(request: pytest.FixtureRequest) -> None:
    """Bind the class below to the implementation named by ``--upsertmat-impl``."""
    name = selected_implementation(request.config)
    command = selected_command(request.config)
    if command is not None:
        request.cls.command = command
        request.cls.command_scenarios_in_session = bool(
            request.config.getoption("upsertmat_scenarios_in_session", default=False)
        )
        granularity = selected_granularity(request.config)
        if granularity is not None:
            request.cls.ttl_granularity = Granularity(granularity)
    elif name is not None:
        request.cls.implementation = name
    else:
        pytest.skip("no --upsertmat-impl or --upsertmat-cmd given")


class TestSelectedImplementation(MaterializerTests):
    """The whole suite against the implementation named on the command line."""
