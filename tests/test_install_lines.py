"""The install lines of the docs agree with the README and with pyproject.toml's extras.

The README says upsertmat is on no package index yet (install from a clone, or a wheel built
once) and that an editable install is always the pure-Python build (a developer's install:
CONTRIBUTING.md). So a page a user reads must not tell them to ``pip install 'upsertmat[X]'``
from an index (unless the line says "once published"), must not give them an editable install
of a user's extra without saying it is the pure build, and may name only extras that exist;
the README's list of extras names every one.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
EXTRAS = set(
    tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
)
DEVELOPERS = {"dev"}
"""Extras only the project's own checks need: an editable install with one is a developer's."""

INSTALL = re.compile(r"pip install(?P<args>[^`\n#&;|]*)")
"""An install line's arguments: up to the end of the code span, a comment or the next command."""
TARGET = re.compile(r"""['"]?(?P<where>[^\s'"\[]*)\[(?P<extras>[^\]]+)\]['"]?""")


def install_lines() -> list[tuple[str, str, str]]:
    """(page:line, the line, the pip install arguments) of every install line of the pages."""
    found = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            for match in INSTALL.finditer(line):
                found.append((f"{page.relative_to(ROOT)}:{number}", line, match.group("args")))
    return found


def test_no_page_installs_upsertmat_from_an_index() -> None:
    wrong = [
        where
        for where, line, args in install_lines()
        if re.search(r"""(^|\s)['"]?upsertmat(\[|['"\s]|$)""", args) and "once published" not in line
    ]
    assert wrong == [], f"upsertmat is on no index (README): install from a clone: {wrong}"


def test_an_editable_install_of_a_users_extra_is_a_developers() -> None:
    wrong = []
    for where, line, args in install_lines():
        if not re.search(r"(^|\s)-e(\s|$)", args) or where.startswith("CONTRIBUTING.md"):
            continue
        named = {extra.strip() for match in TARGET.finditer(args) for extra in match["extras"].split(",")}
        if named and not named & DEVELOPERS and "pure" not in line:
            wrong.append(where)
    assert wrong == [], f"an editable install is the pure build (README); say so or drop -e: {wrong}"


def test_every_extra_named_exists_and_the_readme_lists_them_all() -> None:
    named = {
        (where, extra.strip())
        for where, _, args in install_lines()
        for match in TARGET.finditer(args)
        for extra in match["extras"].split(",")
    }
    assert sorted(item for item in named if item[1] not in EXTRAS) == []
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"Extras:\s(?P<list>.*?)\.\n", readme, re.DOTALL)
    assert listed is not None, "the README lists the extras in a sentence starting 'Extras: '"
    assert {name for name in re.findall(r"`(\w+)`", listed["list"])} == EXTRAS


SOURCES = ("src", "impls", "conformance", "spec", "tools")
INDEX_HINT = re.compile(r"""pip install ['"]?upsertmat\[""")


def test_every_hint_for_a_missing_extra_installs_from_a_clone() -> None:
    """Issue 45: the pipeline's, the conformance plugin's and the bench's hints said ``pip install
    'upsertmat[X]'`` (from an index, which has no upsertmat) while the command line said ``pip
    install '.[X]'``. Every hint now says :func:`upsertmat.impls.build.needs_extra`'s words."""
    from upsertmat.commands.bench import PLOTS_SKIPPED
    from upsertmat.conformance.plugin import extra_hint
    from upsertmat.impls.build import install_hint, needs_extra
    from upsertmat.jobs.runner import INSTALL_HINT

    wrong = sorted(
        str(path.relative_to(ROOT))
        for folder in SOURCES
        for path in (ROOT / folder).rglob("*.py")
        if INDEX_HINT.search(path.read_text(encoding="utf-8"))
    )
    assert wrong == []
    assert needs_extra("spark", " (PySpark)") == (
        "needs the 'spark' extra (PySpark): install upsertmat with it, from its clone: pip install '.[spark]'"
    )
    for hint, extra in ((INSTALL_HINT, "spark"), (extra_hint(), "conformance"), (PLOTS_SKIPPED, "bench")):
        assert f"needs the '{extra}' extra" in hint and install_hint(extra) in hint, hint
    assert INSTALL_HINT == (
        "the pipeline needs the 'spark' extra (PySpark) and Java 17+: install upsertmat with it, from its "
        "clone: pip install '.[spark]'"
    )
