"""``upsertmat client --gateway URL COMMAND``: submit, list, status, stop, explain, result.

The results are drawn by the renderers of ``upsertmat run --result-mode`` (table, changelog,
tableau). Exit codes: 0 ok (``result`` ends when the job has stopped: end of stream), 1 the job
FAILED (``result``), 2 a request the gateway refused (4xx; its message on stderr), 4 the gateway
cannot be reached or failed (5xx), 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from upsertmat.client.modes import RESULT_MODES, TABLEAU_FORMATS
from upsertmat.commands.options import positive_int
from upsertmat.errors import CliError, ExitCode
from upsertmat.impls.config import ConfigError, load_config_file, parse_set_option

NAME = "client"
TOKEN_ENV = "UPSERTMAT_GATEWAY_TOKEN"
EPILOG = """\
examples:
  upsertmat client --gateway http://127.0.0.1:8083 submit job.yaml --set table.exec.state.ttl='1 h'
  upsertmat client --gateway http://127.0.0.1:8083 list
  upsertmat client --gateway http://127.0.0.1:8083 result j-3f9a1c07b2 --mode table
  upsertmat client --gateway http://127.0.0.1:8083 result j-3f9a1c07b2 --mode tableau --format jsonl
  upsertmat client --gateway http://127.0.0.1:8083 stop j-3f9a1c07b2
"""


def _client() -> Any:
    try:
        from upsertmat.client.http import GatewayClient
    except ImportError as error:
        raise CliError(
            f"the client needs {error.name}: pip install 'upsertmat[gateway]'", ExitCode.USAGE
        ) from None
    return GatewayClient


def _fail(error: Any) -> CliError:
    if error.status == 0 or error.status >= 500:
        return CliError(
            error.message if error.status == 0 else f"the gateway failed: {error.message}", ExitCode.IO
        )
    return CliError(f"the gateway refused the request ({error.status}): {error.message}", ExitCode.USAGE)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    try:
        if args.config is not None:
            layer.update(load_config_file(args.config))
        for text in args.settings:
            key, value = parse_set_option(text)
            layer[key] = value
    except ConfigError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    return layer


def _print(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


def run(args: argparse.Namespace) -> int:
    """``upsertmat client``."""
    from upsertmat.client.http import GatewayError

    token = args.token or os.environ.get(TOKEN_ENV) or None
    with _client()(args.gateway, token) as client:
        try:
            return int(_dispatch(client, args))
        except GatewayError as error:
            raise _fail(error) from None


def _dispatch(client: Any, args: argparse.Namespace) -> int:
    action = args.action
    if action == "submit":
        try:
            text = args.file.read_text(encoding="utf-8")
        except OSError as error:
            raise CliError(f"cannot read {args.file}: {error.strerror}", ExitCode.USAGE) from None
        session = args.session or client.open_session()
        if args.file.suffix == ".json":
            try:
                plan = json.loads(text)
            except ValueError as error:
                raise CliError(f"{args.file} is not JSON: {error}", ExitCode.USAGE) from None
            status = client.submit(session, plan=plan, settings=_settings(args))
        else:
            status = client.submit(session, job=text, settings=_settings(args))
        if args.format == "json":
            _print(status)
        else:
            print(status["id"])
            print(
                f"upsertmat client: job {status['id']} ({status['name']}) {status['state']} "
                f"in session {session}",
                file=sys.stderr,
            )
        return int(ExitCode.OK)
    if action == "list":
        jobs = client.jobs()
        if args.format == "json":
            _print(jobs)
        else:
            for job in jobs:
                print(
                    f"{job['id']}\t{job['state']}\t{job['name']}\tbatch {job.get('committed_batch')}\t"
                    f"{job.get('rows')} rows\t{job.get('changes_per_second', 0)} changes/s"
                )
        return int(ExitCode.OK)
    if action == "status":
        _print(client.job(args.job))
        return int(ExitCode.OK)
    if action == "stop":
        _print(client.stop(args.job))
        return int(ExitCode.OK)
    if action == "explain":
        print(client.explain(args.job), end="")
        return int(ExitCode.OK)
    return _result(client, args)


def _result(client: Any, args: argparse.Namespace) -> int:
    from upsertmat.client.follow import follow_changelog, watch_table
    from upsertmat.client.render import PageKeys, TableScreen, make_renderer
    from upsertmat.interrupt import StopSignals

    client.job(args.job)  # 404 before drawing anything
    title = f"upsertmat client: job {args.job}"
    prefix = "upsertmat client"
    with StopSignals(prefix, busy=True, force=True) as signals:  # stops at its next poll; again: at once
        renderer = make_renderer(
            args.mode,
            title,
            max_rows=args.max_table_rows,
            keep=args.max_changelog_rows,
            format=args.format_lines,
        )
        try:
            if isinstance(renderer, TableScreen):
                with PageKeys(renderer.turn):
                    state = watch_table(
                        client,
                        args.job,
                        renderer,
                        max_rows=args.max_table_rows,
                        interval=args.interval,
                        stop=signals,
                    )
            else:
                state = follow_changelog(
                    client, args.job, renderer, interval=args.interval, stop=signals, start=args.start
                )
        except BrokenPipeError:  # stdout's reader went away (| head): quiet, as Unix tools are
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            return 128 + signal.SIGPIPE
        finally:
            with contextlib.suppress(BrokenPipeError):
                renderer.close()
    if signals():
        print(f"{prefix}: interrupted ({signals.name}); the job runs on in the gateway", file=sys.stderr)
        return signals.exit_code
    if state == "FAILED":
        error = client.job(args.job).get("error")
        print(f"{prefix}: job {args.job} FAILED: {error}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    return int(ExitCode.OK)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``client``."""
    parser = subparsers.add_parser(
        NAME,
        help="talk to an upsertmat gateway: submit, list, status, stop, explain, result",
        description="A client of 'upsertmat gateway' over its REST API.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--gateway", required=True, metavar="URL", help="e.g. http://127.0.0.1:8083")
    parser.add_argument("--token", help=f"the gateway's bearer token (or ${TOKEN_ENV})")
    actions = parser.add_subparsers(
        dest="action",
        metavar="ACTION",
        required=True,
        help="what to ask the gateway (ACTION --help for its options)",
    )
    submit = actions.add_parser("submit", help="submit a job file (YAML) or a compiled plan (.json)")
    submit.add_argument("file", type=Path, metavar="JOB", help="job file (YAML) or plan (JSON)")
    submit.add_argument("--session", help="submit in this session (default: a new one)")
    submit.add_argument("--config", type=Path, metavar="FILE", help="per-request configuration keys (YAML)")
    submit.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="settings",
        help="a per-request configuration key (repeatable)",
    )
    submit.add_argument(
        "--format", choices=("text", "json"), default="text", help="text: the job id; json: status"
    )
    listing = actions.add_parser("list", help="every job with its state and rate")
    listing.add_argument("--format", choices=("text", "json"), default="text")
    for name, text in (
        ("status", "a job's status (JSON)"),
        ("stop", "stop a job at a micro-batch boundary"),
        ("explain", "the job's plan explained"),
    ):
        sub = actions.add_parser(name, help=text)
        sub.add_argument("job", metavar="JOB", help="the job id")
    result = actions.add_parser("result", help="show a job's result: table, changelog or tableau")
    result.add_argument("job", metavar="JOB", help="the job id")
    result.add_argument("--mode", choices=RESULT_MODES, default="table", help="default table")
    result.add_argument(
        "--format",
        dest="format_lines",
        choices=TABLEAU_FORMATS,
        default="text",
        help="tableau's lines: text or jsonl",
    )
    result.add_argument(
        "--start",
        choices=("beginning", "now"),
        default="beginning",
        help="changelog/tableau: from the first change or from now",
    )
    result.add_argument("--interval", type=float, default=1.0, help="seconds between polls (default 1)")
    result.add_argument("--max-table-rows", type=positive_int, default=1000, metavar="N", help="rows held")
    result.add_argument(
        "--max-changelog-rows", type=positive_int, default=1000, metavar="N", help="changes held"
    )
    parser.set_defaults(run=run)
