"""Run the commands the documentation shows, as a reader would, and check its links.

Usage::

    python tools/doccheck.py [FILE...]          # default: README.md, CONTRIBUTING.md, CHANGELOG.md, docs/*.md
    python tools/doccheck.py --list [FILE...]   # the runnable blocks and what CI runs for each
    python tools/doccheck.py --links-only       # only the links

Exit 0 when every marked block ran as the page says and every relative link resolves, 1
otherwise (each failure reported with its file and line), 2 on a usage error.
``tests/test_docs_commands.py`` runs it in CI, one test per page.

**Which blocks run.** A fenced code block runs when an HTML comment starting with
``<!-- doccheck`` is the last thing before it (blank lines aside); GitHub renders the comment
as nothing. Its first line may carry options, and lines after it a body::

    <!-- doccheck -->                   run the block as written
    <!-- doccheck exit=3 -->            ... and expect this exit status (default 0)
    <!-- doccheck setup                 run these lines first (files the text assumes),
    printf '...' > t.jsonl              then the block as written
    -->
    <!-- doccheck ci                    run these shell lines instead: a shortened form of a
    upsertmat bench --quick             long command, or a block that is not a whole program
    -->                                 (the block's output is not compared)
    <!-- doccheck spark -->             needs Java and pyspark (the test is marked ``spark``)
    <!-- doccheck timeout=900 -->       seconds the block may take (default 600)

**How a block runs.** Every page gets one fresh temporary directory holding a copy of the
clone's ``examples/``, so the relative paths of the docs work as in a clone; the page's blocks
run there in order, as a reader following the page would (a later block may use an earlier
one's files). ``$UPSERTMAT_CLONE`` names the clone; the running interpreter's ``bin``
directory comes first on ``PATH`` (its ``upsertmat``, ``pytest`` and ``python``).

- A shell block (```` ```bash ````, ``sh``, ``console``, ``text`` or no language) is either a
  script (run by ``bash -e``; the setup lines first, in the same shell) or, when a line starts
  with ``$ ``, a transcript: each ``$`` line is a command (a trailing backslash continues it) and
  the lines after it are its expected output, stdout and stderr merged, compared line by line;
  a line ``...`` stands for any number of lines. A command without output lines is checked
  for its exit status only.
- A Python block (```` ```python ````) whose lines start with ``>>>`` is a doctest (outputs
  compared by :mod:`doctest`); any other Python block runs as a script.

**Links.** Every relative link ``[text](path)`` and ``[text](path#anchor)`` of the pages must
name an existing file, and an anchor must be a heading of the target page (GitHub's heading
ids: lower case, punctuation dropped, spaces as hyphens, ``-1``, ``-2`` for repeats).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TIMEOUT = 600.0
SHELL_LANGUAGES = frozenset({"", "bash", "sh", "shell", "console", "text"})
PYTHON_LANGUAGES = frozenset({"python", "py", "pycon"})
MARKER = "<!-- doccheck"
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+)(?P<lang>[\w-]*)\s*$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)\)")


class DocError(Exception):
    """A marker that cannot be understood (a usage error of the page, reported with its line)."""


@dataclass(frozen=True)
class Block:
    """One marked fenced block: where it is, its language and text, and its marker's options."""

    path: Path
    line: int
    language: str
    text: str
    exit: int = 0
    setup: str = ""
    ci: str = ""
    spark: bool = False
    timeout: float = DEFAULT_TIMEOUT

    @property
    def where(self) -> str:
        return f"{display(self.path)}:{self.line}"

    def commands(self) -> str:
        """What runs for this block (for ``--list``)."""
        return self.ci or "\n".join(filter(None, [self.setup, self.text]))


@dataclass
class Outcome:
    """What running one block gave."""

    block: Block
    ok: bool
    seconds: float
    detail: str = ""


@dataclass
class Step:
    """One command of a transcript and the output lines the page shows after it."""

    command: str
    expected: list[str] = field(default_factory=list)


def display(path: Path) -> str:
    """``path`` relative to the clone when inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _marker(lines: list[str], start: int, path: Path) -> tuple[dict[str, str], str, int]:
    """The options and body of the marker comment opening at ``lines[start]``, and the index of
    its last line."""
    first = lines[start].strip()[len(MARKER) :]
    end = start
    body_lines: list[str] = []
    if "-->" in first:
        head = first[: first.index("-->")]
    else:
        head = first
        end += 1
        while end < len(lines) and "-->" not in lines[end]:
            body_lines.append(lines[end])
            end += 1
        if end == len(lines):
            raise DocError(f"{display(path)}:{start + 1}: the doccheck comment is not closed with -->")
        if lines[end].strip() != "-->":
            raise DocError(
                f"{display(path)}:{end + 1}: put the closing --> of a doccheck comment on its own line"
            )
    options: dict[str, str] = {}
    for word in head.split():
        name, _, value = word.partition("=")
        if name not in {"exit", "setup", "ci", "spark", "timeout"}:
            raise DocError(f"{display(path)}:{start + 1}: unknown doccheck option {word!r}")
        options[name] = value
    body = "\n".join(body_lines).strip("\n")
    if body and not ({"setup", "ci"} & set(options)):
        raise DocError(
            f"{display(path)}:{start + 1}: a doccheck body needs 'setup' or 'ci' to say what it is"
        )
    if ({"setup", "ci"} & set(options)) and not body:
        raise DocError(f"{display(path)}:{start + 1}: 'setup' and 'ci' need the lines to run, before -->")
    return options, body, end


def blocks(path: Path) -> list[Block]:
    """The marked blocks of ``path``, in page order."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    pending: tuple[dict[str, str], str, int] | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if stripped.startswith(MARKER):
            options, body, end = _marker(lines, index, path)
            pending = (options, body, index + 1)
            index = end + 1
            continue
        fence = FENCE.match(line)
        if fence:
            indent, ticks = fence["indent"], fence["fence"]
            close = index + 1
            while close < len(lines) and lines[close].strip() != ticks:
                close += 1
            if pending is not None:
                options, body, marker_line = pending
                text = "\n".join(
                    text_line[len(indent) :] if text_line.startswith(indent) else text_line.lstrip()
                    for text_line in lines[index + 1 : close]
                )
                language = fence["lang"].lower()
                if language not in SHELL_LANGUAGES | PYTHON_LANGUAGES:
                    raise DocError(f"{display(path)}:{marker_line}: doccheck cannot run a {language!r} block")
                try:
                    found.append(
                        Block(
                            path=path,
                            line=index + 1,
                            language=language,
                            text=text,
                            exit=int(options.get("exit") or 0),
                            setup=body if "setup" in options else "",
                            ci=body if "ci" in options else "",
                            spark="spark" in options,
                            timeout=float(options.get("timeout") or DEFAULT_TIMEOUT),
                        )
                    )
                except ValueError:
                    raise DocError(
                        f"{display(path)}:{marker_line}: exit= and timeout= take numbers"
                    ) from None
            pending = None
            index = close + 1
            continue
        if stripped and pending is not None:
            raise _misplaced(path, pending[2])
        index += 1
    if pending is not None:
        raise _misplaced(path, pending[2])
    return found


def _misplaced(path: Path, line: int) -> DocError:
    return DocError(f"{display(path)}:{line}: a doccheck comment must come right before a fenced block")


def transcript(text: str) -> list[Step] | None:
    """The steps of a transcript (``$ `` lines and their output), or None for a script."""
    lines = text.split("\n")
    if not any(line.startswith("$ ") for line in lines):
        return None
    steps: list[Step] = []
    continued = False
    for line in lines:
        if continued:
            steps[-1].command += "\n" + line
            continued = line.endswith("\\")
        elif line.startswith("$ "):
            steps.append(Step(line[2:]))
            continued = line.endswith("\\")
        elif steps:
            steps[-1].expected.append(line)
        elif line.strip():
            raise DocError(f"output line before the first command: {line!r}")
    for step in steps:
        while step.expected and not step.expected[-1].strip():
            step.expected.pop()
    return steps


def matches(expected: Sequence[str], actual: str) -> bool:
    """``actual`` (lines) equals ``expected``, where a line ``...`` stands for any lines."""
    pattern = "".join("(?:.*\n)*?" if line.strip() == "..." else re.escape(line) + "\n" for line in expected)
    text = actual if actual.endswith("\n") or not actual else actual + "\n"
    return re.fullmatch(pattern, text) is not None


def environment() -> dict[str, str]:
    """The blocks' environment: the clone named, the running interpreter's tools first on PATH."""
    env = dict(os.environ)
    env["UPSERTMAT_CLONE"] = str(ROOT)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["MPLBACKEND"] = "Agg"
    env.pop("PYTHONPATH", None)
    return env


def _run(argv: list[str], cwd: Path, timeout: float, stdin: str | None = None) -> tuple[int, str]:
    """(exit status, stdout and stderr merged) of ``argv``; a timeout is status -1."""
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=environment(),
            input=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as expired:
        output = expired.stdout if isinstance(expired.stdout, str) else ""
        return -1, output + f"\n[doccheck: timed out after {timeout:g} s]"
    return done.returncode, done.stdout


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip("\n").split("\n")[-lines:])


def run_shell(block: Block, cwd: Path) -> tuple[bool, str]:
    """Run a shell block: the CI form, a script, or a transcript command by command."""
    steps = None if block.ci else transcript(block.text)
    if steps is None:
        script = block.ci or "\n".join(filter(None, [block.setup, block.text]))
        status, output = _run(["bash", "-e", "-c", script], cwd, block.timeout)
        if status != block.exit:
            return False, f"exit status {status}, expected {block.exit}; output:\n{_tail(output)}"
        return True, ""
    if block.setup:
        status, output = _run(["bash", "-e", "-c", block.setup], cwd, block.timeout)
        if status != 0:
            return False, f"the setup exited {status}; output:\n{_tail(output)}"
    for number, step in enumerate(steps, start=1):
        status, output = _run(["bash", "-c", step.command], cwd, block.timeout)
        wanted = block.exit if number == len(steps) else 0
        if status != wanted:
            return (
                False,
                f"$ {step.command}\nexit status {status}, expected {wanted}; output:\n{_tail(output)}",
            )
        if step.expected and not matches(step.expected, output):
            expected = "\n".join(step.expected)
            return False, f"$ {step.command}\nexpected:\n{expected}\ngot:\n{_tail(output, 60)}"
    return True, ""


def run_python(block: Block, cwd: Path) -> tuple[bool, str]:
    """Run a Python block: a doctest (``>>>`` lines) or a script."""
    code = block.text
    if any(line.startswith(">>>") for line in code.split("\n")):
        (cwd / "doccheck-block.txt").write_text(code + "\n", encoding="utf-8")
        argv = [sys.executable, "-m", "doctest", "doccheck-block.txt"]
        status, output = _run(argv, cwd, block.timeout)
    else:
        status, output = _run([sys.executable, "-"], cwd, block.timeout, stdin=code)
    if status != block.exit:
        return False, f"exit status {status}, expected {block.exit}; output:\n{_tail(output)}"
    return True, ""


def run_page(path: Path, report: bool = True) -> list[Outcome]:
    """Run the marked blocks of one page, in order, in a fresh directory; the outcomes."""
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="upsertmat-doccheck-") as directory:
        cwd = Path(directory)
        shutil.copytree(ROOT / "examples", cwd / "examples")
        for block in blocks(path):
            if block.setup and block.language in PYTHON_LANGUAGES:
                raise DocError(f"{block.where}: 'setup' is for shell blocks")
            started = time.monotonic()
            python = block.language in PYTHON_LANGUAGES and not block.ci  # a ci body is shell lines
            runner = run_python if python else run_shell
            ok, detail = runner(block, cwd)
            outcome = Outcome(block, ok, time.monotonic() - started, detail)
            outcomes.append(outcome)
            if report:
                state = "ok" if ok else "FAILED"
                print(f"{block.where}: {state} ({outcome.seconds:.1f} s)", flush=True)
                if not ok:
                    print(_indent(detail), flush=True)
    return outcomes


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.split("\n"))


def slug(heading: str) -> str:
    """GitHub's id of a heading: markdown links and code marks dropped, lower case, punctuation
    other than ``-`` and ``_`` dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The heading ids of a page (repeats get ``-1``, ``-2``, ...) and its explicit anchors
    (``<a id="..."></a>``, ``<a name="...">``); fenced blocks are skipped."""
    ids: set[str] = set()
    counts: dict[str, int] = {}
    fenced = False
    for line in path.read_text(encoding="utf-8").split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            ids.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line))
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or heading is None:
            continue
        base = slug(heading[1])
        seen = counts.get(base, 0)
        ids.add(base if seen == 0 else f"{base}-{seen}")
        counts[base] = seen + 1
    return ids


def links(path: Path) -> Iterator[str]:
    """Problems with the relative links of ``path`` (outside fenced blocks and code spans)."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = match["target"]
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            name, _, anchor = target.partition("#")
            file = (path.parent / name).resolve() if name else path.resolve()
            where = f"{display(path)}:{number}"
            if not file.exists():
                yield f"{where}: the link {target} names {display(file)}, which does not exist"
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                yield f"{where}: the link {target} names a heading {display(file)} does not have"


def default_pages() -> list[Path]:
    """README.md, CONTRIBUTING.md, CHANGELOG.md and every page of docs/ (not the generated
    conformance reports)."""
    return [ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")] + sorted(
        (ROOT / "docs").glob("*.md")
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python tools/doccheck.py",
        description="Run the commands the docs mark as runnable (<!-- doccheck -->) and check their links.",
    )
    parser.add_argument(
        "files",
        nargs="*",
        type=Path,
        help="pages (default: README.md, CONTRIBUTING.md, CHANGELOG.md and docs/*.md)",
    )
    parser.add_argument("--list", action="store_true", help="list the runnable blocks and what CI runs")
    parser.add_argument("--links-only", action="store_true", help="check the links, run nothing")
    args = parser.parse_args(argv)
    pages = args.files or default_pages()
    try:
        problems = [problem for page in pages for problem in links(page)]
        for problem in problems:
            print(problem)
        if args.list:
            for page in pages:
                for block in blocks(page):
                    print(f"{block.where} [{block.language or 'shell'}]{' spark' if block.spark else ''}")
                    print(_indent(block.commands()))
            return 1 if problems else 0
        if args.links_only:
            return 1 if problems else 0
        failed = [outcome for page in pages for outcome in run_page(page) if not outcome.ok]
    except (DocError, OSError) as error:
        print(f"doccheck: {error}", file=sys.stderr)
        return 2
    if failed or problems:
        print(f"doccheck: {len(failed)} block(s) failed, {len(problems)} link problem(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
