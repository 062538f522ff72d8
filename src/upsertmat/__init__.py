"""upsertmat — executable specification, implementations and conformance suite for sink
upsert materialization. Subpackages: ``spec`` (the model), ``impls`` (implementations),
``conformance`` (the reusable test suite); ``cli`` is the command line."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("upsertmat")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
