"""``upsertmat gateway``: the REST service (one process, one Spark session, many jobs).

Binds 127.0.0.1 by default; any other address needs a token (``--token`` or
``UPSERTMAT_GATEWAY_TOKEN``), which every request must then carry. Submitted jobs read and write
only under ``--data-root``. See ``docs/gateway.md``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from upsertmat.commands.options import positive_int, require_module
from upsertmat.errors import CliError, ExitCode
from upsertmat.impls.config import ConfigError, load_config_file, parse_set_option

NAME = "gateway"
TOKEN_ENV = "UPSERTMAT_GATEWAY_TOKEN"
EPILOG = """\
configuration layers of a job, lowest first: built-in defaults < the service defaults
  (--defaults FILE, --set KEY=VALUE) < the session's properties < the job file's config <
  the request's settings.

examples:
  upsertmat gateway --data-root gw/                  # http://127.0.0.1:8083/ (status page)
  upsertmat gateway --data-root gw/ --port 0         # a free port; gw/gateway.json names it
  UPSERTMAT_GATEWAY_TOKEN=s3cret upsertmat gateway --data-root gw/ --host 0.0.0.0 \
      --tls-certfile cert.pem --tls-keyfile key.pem

exit codes: 0 ok; 2 usage (a bad option; off loopback without a token or TLS; a TLS
  certificate or key that cannot be used: checked before anything starts); 3 another
  gateway uses the data root; 4 the port or the data root cannot be used, or Spark does not
  start; 130/143 stopped by SIGINT/SIGTERM (jobs resume on the next start).
"""


def run(args: argparse.Namespace) -> int:
    """``upsertmat gateway``."""
    require_module("pyspark")  # before the gateway imports it: cli.py names the missing extra
    from upsertmat.gateway.server import serve
    from upsertmat.gateway.settings import GatewaySettings

    if (args.tls_certfile is None) != (args.tls_keyfile is None):
        raise CliError("give both --tls-certfile and --tls-keyfile, or neither", ExitCode.USAGE)
    spark_conf: dict[str, str] = {}
    for text in args.spark_conf:
        key, sep, value = text.partition("=")
        if not sep or not key.strip().startswith("spark."):
            raise CliError(f"--spark-conf expects spark.KEY=VALUE, got {text!r}", ExitCode.USAGE)
        spark_conf[key.strip()] = value.strip()
    defaults: dict[str, object] = {}
    try:
        if args.defaults is not None:
            defaults.update(load_config_file(args.defaults))
        for text in args.settings:
            key, value = parse_set_option(text)
            defaults[key] = value
        from upsertmat.impls.config import flatten
        from upsertmat.jobs.loader import resolve_settings, settings_layers

        resolve_settings(settings_layers({}, "", [], [("the service defaults", flatten(defaults))]))
    except ConfigError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    settings = GatewaySettings(
        root=args.data_root,
        host=args.host,
        port=args.port,
        token=args.token or os.environ.get(TOKEN_ENV) or None,
        master=args.master,
        defaults=defaults,
        trigger_interval=args.trigger_interval,
        max_body_bytes=args.max_body_bytes,
        max_jobs=args.max_jobs,
        max_sessions=args.max_sessions,
        session_idle_seconds=args.session_idle_seconds,
        snapshot_seconds=args.snapshot_seconds,
        max_snapshot_rows=args.max_snapshot_rows,
        max_page_size=args.max_page_size,
        tls_certfile=args.tls_certfile,
        tls_keyfile=args.tls_keyfile,
        plain_http=args.plain_http,
        driver_memory=args.driver_memory,
        spark_conf=spark_conf,
    )
    return serve(settings)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``gateway``."""
    from upsertmat.commands.job_options import interval

    parser = subparsers.add_parser(
        NAME,
        help="run the REST gateway: submit, watch and stop jobs, read their results (needs Spark)",
        description="A long-running service: one Spark session, many continuous jobs, a versioned REST "
        "API (/v1, OpenAPI at /v1/openapi.json) and a status page at /.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--data-root",
        type=Path,
        required=True,
        metavar="DIR",
        help="jobs, checkpoints, results and the registry live here; jobs may use no other path",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="bind address (default 127.0.0.1; others need a token)"
    )
    parser.add_argument("--port", type=int, default=8083, help="port (default 8083; 0: a free one)")
    parser.add_argument("--token", help=f"require this bearer token on every request (or ${TOKEN_ENV})")
    parser.add_argument(
        "--tls-certfile",
        type=Path,
        metavar="FILE",
        help="serve HTTPS with this certificate (PEM; with --tls-keyfile)",
    )
    parser.add_argument("--tls-keyfile", type=Path, metavar="FILE", help="its private key (PEM)")
    parser.add_argument(
        "--plain-http",
        action="store_true",
        help="allow plain HTTP off loopback (only behind a proxy that terminates TLS)",
    )
    parser.add_argument("--master", default="local[2]", help="Spark master of the gateway's session")
    parser.add_argument(
        "--spark-conf",
        metavar="spark.KEY=VALUE",
        action="append",
        default=[],
        help="a Spark setting of the gateway's session (repeatable; over the gateway's own bounds)",
    )
    parser.add_argument(
        "--driver-memory",
        default="1g",
        metavar="SIZE",
        help="the Spark driver JVM's heap (spark.driver.memory, default 1g, as Spark)",
    )
    parser.add_argument("--defaults", type=Path, metavar="FILE", help="service defaults: a YAML file of keys")
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="settings",
        help="a service default (repeatable)",
    )
    parser.add_argument(
        "--trigger-interval",
        type=interval,
        default="1000 milliseconds",
        metavar="DURATION",
        help="how often jobs look for new files (default '1 s')",
    )
    bounds = parser.add_argument_group("bounds")
    bounds.add_argument("--max-body-bytes", type=positive_int, default=1 << 20, help="default 1 MiB")
    bounds.add_argument("--max-jobs", type=positive_int, default=8, help="running jobs (default 8)")
    bounds.add_argument("--max-sessions", type=positive_int, default=64, help="open sessions (default 64)")
    bounds.add_argument(
        "--session-idle-seconds",
        type=float,
        default=1800.0,
        help="a session unused this long expires (default 1800)",
    )
    bounds.add_argument(
        "--snapshot-seconds",
        type=float,
        default=600.0,
        help="a table snapshot's tokens work this long (default 600)",
    )
    bounds.add_argument(
        "--max-snapshot-rows",
        type=positive_int,
        default=100_000,
        help="rows a table snapshot holds (default 100000)",
    )
    bounds.add_argument("--max-page-size", type=positive_int, default=10_000, help="default 10000")
    parser.set_defaults(run=run)
