"""Sphinx configuration of the API reference (``tox -e api``; warnings are errors).

The pages are generated from the docstrings of the public modules; the guides stay in the
Markdown files of ``docs/``, which read well on any forge without a build.
"""

from __future__ import annotations

from importlib.metadata import version as _version

project = "upsertmat"
author = "the upsertmat authors"
copyright = "the upsertmat authors"
release = _version("upsertmat")
version = release

extensions = ["sphinx.ext.autodoc", "sphinx.ext.viewcode"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# Members defined in each module only: a name a module re-exports (its `__all__`) is
# documented where it is defined.
autodoc_default_options = {"members": True, "show-inheritance": True, "ignore-module-all": True}
default_role = "py:obj"
nitpicky = False
html_theme = "alabaster"
html_title = f"upsertmat {release} API reference"
exclude_patterns = ["_build"]
