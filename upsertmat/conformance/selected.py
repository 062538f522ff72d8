"""The conformance suite bound to ``--upsertmat-impl=NAME`` (collected by the plugin).

Not a ``test_*`` file, so pytest only collects it when the plugin adds it for that option.
"""

from __future__ import annotations

import pytest

from .plugin import selected_implementation
from .suite import MaterializerTests


@pytest.fixture(autouse=True, scope="class")
def _select_implementation(request: pytest.FixtureRequest) -> None:
    """Bind the class below to the implementation named by ``--upsertmat-impl``."""
    name = selected_implementation(request.config)
    if name is None:
        pytest.skip("no --upsertmat-impl given")
    request.cls.implementation = name


class TestSelectedImplementation(MaterializerTests):
    """The whole suite against the implementation named on the command line."""
