"""Configuration options every command shares: ``--config``, ``--set`` and the shortcuts.

Layers, lowest first (later layers win, key by key): the shipped defaults
(``upsertmat/data/defaults.yaml``) < ``--config FILE`` < ``--set KEY=VALUE`` (in the order
given) < the shortcuts ``--strategy``, ``--backend``, ``--ttl``. Parsing and validation are
``upsertmat.impls.config``'s; this module only gathers the layers from the command line,
and creates the materializer they select (:func:`create_materializer`).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from upsertmat.defaults import DEFAULTS_SOURCE, default_layer
from upsertmat.errors import CliError, ExitCode, StateDirError
from upsertmat.impls.config import (
    BACKEND,
    STRATEGY,
    TTL,
    ConfigError,
    build_settings,
    load_config_file,
    parse_set_option,
)
from upsertmat.impls.registry import UnknownImplementation, create
from upsertmat.impls.settings import Backend, Settings, Strategy
from upsertmat.impls.state.errors import BackendUnavailableError, StateError, StorageError
from upsertmat.spark.config import PIPELINE_STRATEGIES
from upsertmat.spec import Keys, Materializer

_SHORTCUTS = (("strategy", STRATEGY), ("backend", BACKEND), ("ttl", TTL))


def require_module(module: str) -> None:
    """ModuleNotFoundError naming ``module`` unless it can be imported: for a command that would
    otherwise import it only once it has started (Spark's JVM, reading stdin). The command line
    turns it into the one line naming the extra that provides the module (cli.py). One lookup."""
    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 written in digits; ArgumentTypeError otherwise."""
    if not text.strip().isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number >= 0 written in digits; ArgumentTypeError otherwise."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)


def parse_columns(text: str) -> tuple[int, ...]:
    """An argparse type: ``"0,2"`` -> ``(0, 2)``, comma-separated 0-based column indexes
    (``""`` -> ``()``); ArgumentTypeError for anything else or a column named twice."""
    if not text.strip():
        return ()
    columns: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise argparse.ArgumentTypeError(
                f"expected comma-separated 0-based column indexes such as 0 or 0,2, got {text!r}"
            )
        if int(part) in columns:
            raise argparse.ArgumentTypeError(f"column {part} is named twice in {text!r}")
        columns.append(int(part))
    return tuple(columns)


def add_max_int_digits(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Add ``--max-int-digits N`` (the longest integer of the input; :func:`apply_max_int_digits`)."""
    parser.add_argument(
        "--max-int-digits",
        type=non_negative_int,
        metavar="N",
        help=f"longest integer (in digits) accepted in the input and written to the output (default "
        f"{sys.get_int_max_str_digits()}, Python's; 0 = no limit)",
    )


def apply_max_int_digits(args: argparse.Namespace) -> None:
    """Set the interpreter's integer digit limit to ``--max-int-digits`` if given."""
    if args.max_int_digits is not None:
        sys.set_int_max_str_digits(args.max_int_digits)


def add_config_arguments(parser: argparse.ArgumentParser, pipeline: str | None = None) -> None:
    """Add ``--config``, ``--set``, ``--strategy``, ``--backend``, ``--ttl`` to ``parser``.

    ``pipeline`` (not None): the command runs on the PySpark pipeline, and this names its own
    layers between the pipeline's defaults and the command line's (``"the job file's config"``;
    may be empty): ``--strategy`` and ``--backend`` then offer only what the pipeline runs (no
    SORTED; the spark backend).
    """
    if pipeline is None:
        layers = "built-in defaults"
        strategies = ", ".join(strategy.value for strategy in Strategy)
        backends = ", ".join(backend.value for backend in Backend if backend is not Backend.SPARK)
    else:
        layers = "built-in defaults < the pipeline's defaults (backend spark, strategy VALUE)"
        layers += f" < {pipeline}" if pipeline else ""
        strategies = ", ".join(strategy.value for strategy in PIPELINE_STRATEGIES)
        backends = f"{Backend.SPARK.value} (the pipeline keeps its state in Spark's state store)"
    text = f"Layers, lowest first: {layers} < --config FILE < --set KEY=VALUE < --strategy/--backend/--ttl."
    # Filled here: a command with a raw-description formatter (for its epilog) keeps it as given.
    group = parser.add_argument_group("configuration", textwrap.fill(text, 78))
    group.add_argument("--config", metavar="FILE", type=Path, help="YAML file of keys (flat or nested)")
    group.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="settings",
        help="set one configuration key (repeatable)",
    )
    group.add_argument("--strategy", metavar="NAME", help=f"shortcut for {STRATEGY}: {strategies} (any case)")
    group.add_argument("--backend", metavar="NAME", help=f"shortcut for {BACKEND}: {backends}")
    group.add_argument("--ttl", metavar="DURATION", help=f"shortcut for {TTL}, e.g. 0, 1000, '10 s', '1 h'")


def config_layers(args: argparse.Namespace) -> list[tuple[str, Mapping[str, Any]]]:
    """The ``(source, {key: value})`` layers of a parsed command line, lowest first."""
    layers: list[tuple[str, Mapping[str, Any]]] = [(DEFAULTS_SOURCE, default_layer())]
    if args.config is not None:
        layers.append((f"--config {args.config}", load_config_file(args.config)))
    for text in args.settings:
        key, value = parse_set_option(text)
        layers.append((f"--set {text}", {key: value}))
    for option, key in _SHORTCUTS:
        value = getattr(args, option)
        if value is not None:
            layers.append((f"--{option} {value}", {key: value}))
    return layers


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The settings a command line selects. Raises ConfigError naming the key and its source."""
    return build_settings(config_layers(args))


def create_materializer(keys: Keys, settings: Settings) -> Materializer:
    """``upsertmat.impls.create(keys, settings)`` for a command: what can go wrong as a
    :class:`CliError` (exit 2; 4 for a full disk) or a refused state directory (exit 3)."""
    try:
        return create(keys, settings)
    except (ConfigError, UnknownImplementation, BackendUnavailableError) as error:
        raise CliError(str(error)) from None
    except StorageError as error:  # e.g. no space for a new database
        raise CliError(f"{error}; free space and run the same command again", ExitCode.IO) from None
    except StateError as error:  # locked or damaged backend state under --state-dir
        raise StateDirError(str(error)) from None
    except ImportError as error:
        name = f"{settings.strategy.value}/{settings.backend.value}"
        raise CliError(f"{name} needs {error.name or error}, which is not installed") from None
