"""The URL convention every file-based sink shares: SQLAlchemy's slashes.

``SCHEME:///rel/path`` (three slashes) is relative to a base directory (the working directory for
a URL given on the command line or to a pipeline config; the job file's directory in a job file);
``SCHEME:////abs/path`` (four slashes) is absolute. O(len(url)).
"""

from __future__ import annotations

from pathlib import Path

from .kind import SinkUrlError


def scheme_path(url: str, prefix: str, what: str, base: Path | None) -> Path:
    """The path of ``url`` after ``prefix`` (``delta:///``), joined to ``base`` when relative and
    ``base`` is given; SinkUrlError naming both forms when it has none or the prefix differs."""
    if not url.startswith(prefix) or len(url) == len(prefix):
        scheme = prefix.split(":")[0]
        raise SinkUrlError(
            f"unsupported {what} URL {url!r}: write {scheme}:///relative/dir or {scheme}:////absolute/dir "
            "(three slashes: relative, four: absolute, as for sqlite:)"
        )
    path = Path(url[len(prefix) :])
    return path if path.is_absolute() or base is None else base / path


def absolute(prefix: str, path: Path) -> str:
    """The four-slash URL of ``path`` (made absolute and resolved) under ``prefix``."""
    return prefix + str(path.resolve())
