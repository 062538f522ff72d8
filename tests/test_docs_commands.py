"""The documentation's commands run as written (tools/doccheck.py), and its links resolve.

One test per page runs the page's marked blocks in a fresh directory (slow; pages with a Spark
block are marked ``spark``). The machinery itself is tested first, on small pages of its own:
a check that cannot fail would prove nothing about the docs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .toolscripts import load

ROOT = Path(__file__).resolve().parent.parent


doccheck = load("doccheck")


def page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return path


def outcomes(tmp_path: Path, text: str) -> list[tuple[bool, str]]:
    return [(outcome.ok, outcome.detail) for outcome in doccheck.run_page(page(tmp_path, text), report=False)]


def test_only_marked_blocks_run_in_page_order_in_one_directory(tmp_path: Path) -> None:
    text = """# A page
```bash
exit 1
```
<!-- doccheck -->

```bash
echo made > file.txt
```
<!-- doccheck -->
```console
$ cat file.txt
made
$ ls examples/out-of-order.jsonl
examples/out-of-order.jsonl
```
"""
    assert outcomes(tmp_path, text) == [(True, ""), (True, "")]


def test_a_transcript_compares_output_with_ellipsis_lines(tmp_path: Path) -> None:
    good = """<!-- doccheck -->
```
$ printf 'a\\nb\\nc\\nd\\n'
a
...
d
$ echo warning >&2
warning
```
"""
    assert outcomes(tmp_path, good) == [(True, "")]
    bad = good.replace("\nd\n$", "\nx\n$")
    [(ok, detail)] = outcomes(tmp_path, bad)
    assert not ok and "expected:" in detail and "got:" in detail


def test_exit_status_setup_and_ci_forms(tmp_path: Path) -> None:
    text = """<!-- doccheck exit=3 -->
```bash
exit 3
```
<!-- doccheck setup
printf '{"op": "+I", "row": [1, "a"]}\\n' > in.jsonl
-->
```
$ upsertmat replay --pk 0 in.jsonl
{"in": 0, "op": "+I", "row": [1, "a"]}
```
<!-- doccheck ci
true
-->
```bash
sleep 100000   # a long command; CI runs the body instead
```
<!-- doccheck -->
```bash
false
```
"""
    results = outcomes(tmp_path, text)
    assert [ok for ok, _ in results] == [True, True, True, False]
    assert "exit status 1, expected 0" in results[3][1]


def test_python_blocks_run_as_doctests_or_scripts(tmp_path: Path) -> None:
    text = """<!-- doccheck -->
```python
>>> 1 + 1
2
```
<!-- doccheck -->
```python
>>> 1 + 1
3
```
<!-- doccheck -->
```python
raise SystemExit(0)
```
<!-- doccheck ci
printf 'class Fragment:\n    pass\n' > fragment.py && python fragment.py
-->
```python
class Fragment(NameNotDefinedHere):  # a fragment: CI runs the shell lines of the comment
    ...
```
"""
    assert [ok for ok, _ in outcomes(tmp_path, text)] == [True, False, True, True]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- doccheck nonsense -->\n```bash\ntrue\n```\n", "unknown doccheck option"),
        ("<!-- doccheck -->\nsome prose\n```bash\ntrue\n```\n", "right before a fenced block"),
        ("<!-- doccheck\ntrue\n-->\n```bash\ntrue\n```\n", "needs 'setup' or 'ci'"),
        ("<!-- doccheck ci -->\n```bash\ntrue\n```\n", "need the lines to run"),
        ("<!-- doccheck -->\n```java\nclass A {}\n```\n", "cannot run a 'java' block"),
    ],
)
def test_a_marker_that_cannot_be_understood_is_an_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(doccheck.DocError, match=message):
        doccheck.blocks(page(tmp_path, text))


def test_links_must_name_existing_files_and_headings(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text(
        "# Other\n## A `code` heading, with punctuation!\n## Twice\n## Twice\n"
    )
    good = (
        "[a](other.md) [b](other.md#a-code-heading-with-punctuation) [c](other.md#twice-1) [d](#top)\n# Top\n"
    )
    assert list(doccheck.links(page(tmp_path, good))) == []
    bad = "[a](missing.md) [b](other.md#no-such-heading) `[c](ignored.md)` [d](https://example.org/x)\n"
    problems = list(doccheck.links(page(tmp_path, bad)))
    assert len(problems) == 2
    assert "missing.md" in problems[0] and "no-such-heading" in problems[1]


def test_the_docs_links_resolve() -> None:
    assert [problem for path in doccheck.default_pages() for problem in doccheck.links(path)] == []


def _page_params() -> list[Any]:
    params = []
    for path in doccheck.default_pages():
        found = doccheck.blocks(path)
        if found:
            marks = [pytest.mark.slow] + ([pytest.mark.spark] if any(b.spark for b in found) else [])
            params.append(pytest.param(path, marks=marks, id=path.name))
    return params


@pytest.mark.parametrize("path", _page_params())
def test_the_commands_of_the_page_run_as_written(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failed = [outcome for outcome in doccheck.run_page(path) if not outcome.ok]
    assert failed == [], capsys.readouterr().out
