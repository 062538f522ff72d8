"""upsertmat — executable specification, implementations and conformance suite for sink
upsert materialization. Subpackages: ``spec`` (the model), ``impls`` (implementations),
``conformance`` (the reusable test suite); ``cli`` is the command line."""

from typing import Any


def __getattr__(name: str) -> Any:
    # ``__version__`` is read from the installed metadata on first use: importing
    # importlib.metadata costs a tenth of a second, which the command line's start-up (where a
    # Ctrl-C must already be handled, upsertmat.__main__) should not pay before it needs it.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("upsertmat")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"
