"""A command whose extra is not installed says which one: one line, exit 2, no traceback.

Each case runs the real command in a real virtualenv that lacks the extra's packages: a venv
(no pip, no system site-packages) whose site-packages links every entry of this environment's
but those of the distributions left out, so the import fails as after ``pip install .`` or
``pip install '.[spark]'`` (the README's install). Building one is a directory of symlinks.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sysconfig
import venv
from collections.abc import Iterable
from pathlib import Path

import pytest

from upsertmat.cli import COMMAND_EXTRAS, extras_providing, missing_extra


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _top_level_entries(distribution: str) -> set[str]:
    """The names in site-packages a distribution installed (its packages, modules, dist-info)."""
    files = importlib.metadata.distribution(distribution).files or []
    return {Path(str(path)).parts[0] for path in files if not str(path).startswith("..")}


def _base_closure() -> set[str]:
    """upsertmat and every distribution its base dependencies pull in (no extra), installed here."""
    wanted, seen = ["upsertmat"], set()
    while wanted:
        name = _name(wanted.pop())
        if name in seen:
            continue
        try:
            requirements = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for text in requirements:
            if "extra ==" in text or "extra==" in text:
                continue
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", text)
            if match:
                wanted.append(match.group(1))
    return seen


def venv_without(target: Path, left_out: Iterable[str]) -> Path:
    """A virtualenv at ``target`` with this environment's site-packages less the distributions
    ``left_out``; its python."""
    excluded: set[str] = set()
    for distribution in left_out:
        excluded |= _top_level_entries(distribution)
    venv.EnvBuilder(with_pip=False, symlinks=True).create(target)
    site = Path(sysconfig.get_paths()["purelib"])
    (own_site,) = target.glob("lib/python*/site-packages")
    for entry in site.iterdir():
        if entry.name not in excluded and entry.name != "__pycache__":
            (own_site / entry.name).symlink_to(entry)
    return target / "bin" / "python"


def installed_distributions() -> set[str]:
    return {_name(d.metadata["Name"]) for d in importlib.metadata.distributions() if d.metadata["Name"]}


def extra_only(extra: str, *, keeping: str | None = None) -> set[str]:
    """The distributions of ``extra`` that the ``keeping`` extra (if any) does not install."""
    extras = extras_providing()
    return extras[extra] - (extras[keeping] if keeping else set())


def run(python: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "upsertmat", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def hint(command: str, extra: str, module: str) -> str:
    return (
        f"upsertmat {command}: needs the '{extra}' extra (no module named '{module}'): install upsertmat "
        f"with it, from its clone: pip install '.[{extra}]'"
    )


def test_the_gateway_and_the_client_after_the_readmes_spark_install(tmp_path: Path) -> None:
    """``pip install '.[spark]'`` installs no FastAPI and no httpx: both commands name the
    ``gateway`` extra (they printed ModuleNotFoundError's traceback, exit 70)."""
    python = venv_without(tmp_path / "venv", extra_only("gateway", keeping="spark"))
    root = tmp_path / "root"
    root.mkdir()
    done = run(python, "gateway", "--data-root", str(root), "--port", "0", cwd=tmp_path)
    assert (done.returncode, one_line(done)) == (2, hint("gateway", "gateway", "fastapi"))
    done = run(python, "client", "list", cwd=tmp_path)
    assert (done.returncode, one_line(done)) == (2, hint("client", "gateway", "httpx"))
    assert list(root.iterdir()) == []  # the gateway stopped before it used its data root


def test_every_command_of_an_extra_on_the_base_install(tmp_path: Path) -> None:
    """``pip install .`` alone: the commands that need an extra name it, the others work."""
    python = venv_without(tmp_path / "venv", installed_distributions() - _base_closure())
    assert run(python, "--version", cwd=tmp_path).returncode == 0
    done = run(python, "replay", "--pk", "0", "-q", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    cases = {
        ("conformance", "--impl", "LEGACY/heap"): hint("conformance", "conformance", "pytest"),
        ("conformance-reproduce", "--impl", "LEGACY/heap", "--pk", "0", "x.jsonl"): hint(
            "conformance-reproduce", "conformance", "hypothesis"
        ),
        ("conformance-flink", "--pk", "0"): hint("conformance-flink", "flink", "pyflink"),
        ("client", "list"): hint("client", "gateway", "httpx"),
    }
    for argv, expected in cases.items():
        done = run(python, *argv, cwd=tmp_path)
        assert (done.returncode, one_line(done)) == (2, expected), argv
    # the pipeline's commands check for PySpark before Spark would start
    (tmp_path / "job.yaml").write_text(
        "source: {path: data, columns: [{id: long}]}\nkeys: {primary-key: [id]}\n", encoding="utf-8"
    )
    for command, *rest in (["demo"], ["run", "job.yaml"]):
        done = run(python, command, *rest, cwd=tmp_path)
        assert (done.returncode, one_line(done)) == (2, hint(command, "spark", "pyspark")), command


@pytest.mark.parametrize(
    ("command", "module", "extra"),
    [
        ("client", "rich", "gateway"),  # the client's own extra, not the smaller spark that has rich too
        ("run", "rich", "spark"),
        ("run", "deltalake", "lakehouse"),  # a job with a Delta Lake sink
        ("bench", "matplotlib", "bench"),
        ("bench", "pyspark", "spark"),  # bench --pipeline: the smallest extra with PySpark
        ("gateway", "prometheus_client.registry", "gateway"),
        ("conformance-flink", "pyflink", "flink"),
        ("replay", "yaml", None),  # a base dependency: a broken install, reported as a bug
        ("run", "no_such_module", None),
    ],
)
def test_the_extra_named_for_a_missing_module(command: str, module: str, extra: str | None) -> None:
    assert missing_extra(command, ModuleNotFoundError(f"No module named {module!r}", name=module)) == extra


def test_the_table_names_commands_and_extras_that_exist() -> None:
    import argparse

    from upsertmat.cli import build_parser

    (action,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    commands = set(action.choices)
    assert set(COMMAND_EXTRAS) <= commands
    assert set(COMMAND_EXTRAS.values()) <= set(extras_providing())
