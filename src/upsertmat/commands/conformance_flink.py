"""``upsertmat conformance-flink``: Apache Flink 2.3's real SinkUpsertMaterializer as a program under test.

Speaks the process protocol of ``upsertmat replay`` on stdin and stdout (docs/conformance.md,
"Any program under test"), so the conformance suite runs against Flink's operator:
``upsertmat conformance --cmd "upsertmat conformance-flink --strategy MAP" --scenarios-in-session``.
The driver is :func:`upsertmat.conformance.tools.flink.serve`; needs the ``flink`` extra
(PyFlink 2.3.0) and Java 17.
"""

from __future__ import annotations

import argparse

from upsertmat.commands.options import parse_columns, require_module
from upsertmat.errors import CliError, ExitCode

NAME = "conformance-flink"
EPILOG = """\
examples:
  upsertmat conformance --cmd "upsertmat conformance-flink --strategy MAP" --scenarios-in-session
  pytest --upsertmat-cmd "upsertmat conformance-flink --strategy ADAPTIVE --threshold-high 3 \\
      --threshold-low 1" --upsertmat-scenarios-in-session

Flink runs without TTL here: any --set is refused (exit 2), and the suite skips its TTL tests.

exit codes: 0 stdin ended; 2 usage error (a --set, PyFlink not installed); 70 a Flink job
  failed (its Java cause on stderr); 130/143 interrupted.
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``upsertmat conformance-flink``."""
    from upsertmat.conformance.tools.flink import BACKENDS, STRATEGIES  # no PyFlink import

    parser = subparsers.add_parser(
        NAME,
        help="Apache Flink 2.3's SinkUpsertMaterializer as a program under test (the flink extra)",
        description="Read changes on stdin and write the outputs of Apache Flink 2.3.0's real "
        "SinkUpsertMaterializer on stdout, in the JSON Lines protocol of 'upsertmat replay': each "
        "chunk of input (lines up to a pause of --idle seconds) runs as one Flink job.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--strategy", choices=STRATEGIES, default="LEGACY", help="default LEGACY")
    parser.add_argument("--backend", choices=BACKENDS, default="hashmap", help="Flink state backend")
    parser.add_argument("--threshold-high", type=int, metavar="N", help="ADAPTIVE: switch to MAP above N")
    parser.add_argument("--threshold-low", type=int, metavar="N", help="ADAPTIVE: switch back below N")
    parser.add_argument("--pk", required=True, type=parse_columns, metavar="COLS", help="sink primary key")
    parser.add_argument("--upsert-key", default=(), type=parse_columns, metavar="COLS", help="upsert key")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="refused: Flink runs without TTL"
    )
    parser.add_argument(
        "--idle",
        type=float,
        default=0.05,
        metavar="SECONDS",
        help="a pause of stdin that ends a chunk (default 0.05)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve the protocol until stdin ends."""
    if args.set:
        raise CliError(
            "Flink's SinkUpsertMaterializer is run without TTL; settings are not supported: "
            + " ".join(args.set),
            ExitCode.USAGE,
        )
    require_module("pyflink")  # before reading stdin
    from upsertmat.conformance.tools.flink import FlinkOptions, serve

    options = FlinkOptions(
        pk=args.pk,
        upsert_key=args.upsert_key,
        strategy=args.strategy,
        backend=args.backend,
        threshold_high=args.threshold_high,
        threshold_low=args.threshold_low,
        idle=args.idle,
    )
    return serve(options)
