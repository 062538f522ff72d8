"""The error a broken layout invariant raises (``_check``).

Its own module, left interpreted in the compiled build (setup.py): mypyc compiles no
subclass of a built-in exception other than ``Exception`` itself.
"""

from __future__ import annotations


class LayoutError(AssertionError):
    """A layout invariant does not hold (``_check``): the state is damaged or the code wrong."""
