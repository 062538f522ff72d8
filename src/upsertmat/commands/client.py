"""``upsertmat client [--gateway URL | --data-root DIR] COMMAND``: submit, list, status, stop,
restart, delete, explain, result, page.

The gateway's address: ``--gateway URL``, else ``--data-root DIR`` (the URL a running gateway
wrote into ``DIR/gateway.json``), else ``$UPSERTMAT_GATEWAY``, else ``http://127.0.0.1:8083``.
The results are drawn by the renderers of ``upsertmat run --result-mode`` (table, changelog,
tableau). Exit codes: 0 ok (``result --follow`` ends when the job has stopped: end of stream),
1 the job FAILED (``result``), 2 a usage error or a request the gateway refused (4xx; its
message on stderr), 4 the gateway cannot be reached or failed (5xx; ``result`` retries for
``--retry-seconds`` first), 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upsertmat.client.modes import RESULT_MODES, TABLEAU_FORMATS
from upsertmat.commands.options import positive_int
from upsertmat.errors import CliError, ExitCode
from upsertmat.impls.config import ConfigError, load_config_file, parse_set_option
from upsertmat.stdout import silence

if TYPE_CHECKING:  # httpx and pydantic come with the gateway extra: imported when a command runs
    from upsertmat.client.http import GatewayClient, GatewayError

NAME = "client"
TOKEN_ENV = "UPSERTMAT_GATEWAY_TOKEN"
URL_ENV = "UPSERTMAT_GATEWAY"
PREFIX = "upsertmat client"
EPILOG = """\
the gateway: --gateway URL, else --data-root DIR (reads DIR/gateway.json), else
  $UPSERTMAT_GATEWAY, else http://127.0.0.1:8083. The token: --token or $UPSERTMAT_GATEWAY_TOKEN.

examples:
  upsertmat client submit job.yaml --set table.exec.state.ttl='1 h'
  upsertmat client --data-root gw/ list
  upsertmat client result j-3f9a1c07b2 --mode table --follow
  upsertmat client result j-3f9a1c07b2 --mode tableau --format jsonl --follow
  upsertmat client result j-3f9a1c07b2 --mode tableau --from-token c-8d01e5aa42.4 --follow
  upsertmat client stop j-3f9a1c07b2
  upsertmat client restart j-3f9a1c07b2
  upsertmat client delete j-3f9a1c07b2 --results delete

exit codes: 0 ok; 1 the job FAILED (result); 2 usage error or a request the gateway refused
  (4xx); 4 the gateway cannot be reached or failed (5xx); 130/143 interrupted.
"""


def _fail(error: GatewayError) -> CliError:
    if error.status == 0 or error.status >= 500:
        return CliError(
            error.message if error.status == 0 else f"the gateway failed: {error.message}", ExitCode.IO
        )
    return CliError(f"the gateway refused the request ({error.status}): {error.message}", ExitCode.USAGE)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    from upsertmat.impls.config import flatten

    layer: dict[str, Any] = {}
    try:
        if args.config is not None:
            layer.update(load_config_file(args.config))
        for text in args.settings:
            key, value = parse_set_option(text)
            layer[key] = value
    except ConfigError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    return flatten(layer)


def _print(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


def gateway_url(args: argparse.Namespace) -> str:
    """The address to talk to (see the module's docstring); CliError (usage) if it is no URL."""
    from upsertmat.client.http import (  # cli.py names a missing extra
        DEFAULT_URL,
        BadAddress,
        address_of,
        check_url,
    )

    try:
        if args.gateway is not None:
            return check_url(args.gateway)
        if args.data_root is not None:
            return address_of(args.data_root)
        return check_url(os.environ.get(URL_ENV) or DEFAULT_URL)
    except BadAddress as error:
        raise CliError(str(error), ExitCode.USAGE) from None


def run(args: argparse.Namespace) -> int:
    """``upsertmat client``."""
    from upsertmat.client.http import GatewayClient, GatewayError

    url = gateway_url(args)
    token = args.token or os.environ.get(TOKEN_ENV) or None
    if args.cacert is not None and not args.cacert.is_file():
        raise CliError(f"cannot read {args.cacert}: no such file", ExitCode.USAGE)
    rediscover = None
    if args.gateway is None and args.data_root is not None:
        from upsertmat.client.http import address_of

        rediscover = functools.partial(address_of, args.data_root)
    with GatewayClient(url, token, cafile=args.cacert, rediscover=rediscover) as client:
        try:
            return int(_dispatch(client, args))
        except GatewayError as error:
            raise _fail(error) from None


def _dispatch(client: GatewayClient, args: argparse.Namespace) -> int:
    action = args.action
    if action == "submit":
        return _submit(client, args)
    if action == "list":
        jobs = client.jobs()
        if args.format == "json":
            _print([job.model_dump(mode="json") for job in jobs])
        else:
            from upsertmat.client.render import counted, rate_text

            for job in jobs:
                batch = "no batch yet" if job.committed_batch is None else f"batch {job.committed_batch}"
                rows = "rows unknown" if job.rows is None else counted(job.rows, "row")
                print(
                    f"{job.id}\t{job.state.value}\t{job.name}\t{batch}\t{rows}\t"
                    f"{rate_text(job.changes_per_second)}"
                )
        return int(ExitCode.OK)
    if action == "status":
        _print(client.job(args.job).model_dump(mode="json"))
        return int(ExitCode.OK)
    if action in ("stop", "restart"):
        status = client.stop(args.job) if action == "stop" else client.restart(args.job)
        if args.format == "json":
            _print(status.model_dump(mode="json"))
        else:
            print(f"{status.id} {status.state.value}")
        return int(ExitCode.OK)
    if action == "delete":
        from upsertmat.gateway.contract import ResultsOnDelete

        deleted = client.delete(args.job, ResultsOnDelete(args.results))
        kept = f" (its directory kept in {deleted.kept_in})" if deleted.kept_in else ""
        print(f"{deleted.id} deleted, results {deleted.results.value}{kept}")
        return int(ExitCode.OK)
    if action == "explain":
        print(client.explain(args.job), end="")
        return int(ExitCode.OK)
    if action == "page":
        print(client.login_link())
        return int(ExitCode.OK)
    return _result(client, args)


def _submit(client: GatewayClient, args: argparse.Namespace) -> int:
    try:
        text = args.file.read_text(encoding="utf-8")
    except OSError as error:
        raise CliError(f"cannot read {args.file}: {error.strerror}", ExitCode.USAGE) from None
    settings = _settings(args)
    session = args.session or client.open_session()
    if args.file.suffix == ".json":
        try:
            plan = json.loads(text)
        except ValueError as error:
            raise CliError(f"{args.file} is not JSON: {error}", ExitCode.USAGE) from None
        status = client.submit(session, plan=plan, settings=settings)
    else:
        status = client.submit(session, job=text, settings=settings)
    if args.format == "json":
        _print(status.model_dump(mode="json"))
    else:
        print(status.id)
        print(
            f"{PREFIX}: job {status.id} ({status.name}) {status.state.value} in session {session}",
            file=sys.stderr,
        )
    return int(ExitCode.OK)


def _result(client: GatewayClient, args: argparse.Namespace) -> int:
    from upsertmat.client.follow import GaveUp, Position, Retry, follow_changelog, watch_table
    from upsertmat.client.render import PageKeys, TableScreen, make_renderer
    from upsertmat.interrupt import StopSignals

    client.job(args.job)  # 404 before drawing anything
    title = f"{PREFIX}: job {args.job}"
    position = Position(token=args.from_token, start=args.start, after=args.after)
    with StopSignals(PREFIX, busy=True, force=True) as signals:  # stops at its next poll; again: at once
        retry = Retry(signals, args.retry_seconds, lambda text: print(f"{PREFIX}: {text}", file=sys.stderr))
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
                        retry=retry,
                        follow=args.follow,
                    )
            else:
                state = follow_changelog(
                    client,
                    args.job,
                    renderer,
                    interval=args.interval,
                    retry=retry,
                    position=position,
                    follow=args.follow,
                )
        except GaveUp as gave_up:
            resume = f"; resume with --from-token {gave_up.token}" if gave_up.token else ""
            raise CliError(
                f"gave up after {gave_up.seconds:.0f} s of retries: {gave_up.error.message}{resume}",
                ExitCode.IO,
            ) from None
        except BrokenPipeError:  # stdout's reader went away (| head): quiet, as Unix tools are
            return silence()
        finally:
            with contextlib.suppress(BrokenPipeError):
                renderer.close()
    if signals():
        resume = f" (resume with --from-token {position.token})" if position.token else ""
        print(
            f"{PREFIX}: interrupted ({signals.name}); the job runs on in the gateway{resume}", file=sys.stderr
        )
        return signals.exit_code
    if state == "FAILED":
        error = client.job(args.job).error
        print(f"{PREFIX}: job {args.job} FAILED: {error}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
    return int(ExitCode.OK)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``client``."""
    parser = subparsers.add_parser(
        NAME,
        help="talk to an upsertmat gateway: submit, list, status, stop, restart, delete, explain, result",
        description="A client of 'upsertmat gateway' over its REST API.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--gateway", metavar="URL", help="e.g. http://127.0.0.1:8083 (the default)")
    where.add_argument(
        "--data-root", type=Path, metavar="DIR", help="the gateway running on DIR (reads DIR/gateway.json)"
    )
    parser.add_argument("--token", help=f"the gateway's bearer token (or ${TOKEN_ENV})")
    parser.add_argument(
        "--cacert", type=Path, metavar="FILE", help="trust this CA certificate (PEM) for https"
    )
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
        ("explain", "the job's plan explained"),
    ):
        sub = actions.add_parser(name, help=text)
        sub.add_argument("job", metavar="JOB", help="the job id")
    for name, text in (
        ("stop", "stop a job at a micro-batch boundary (prints: JOB STATE)"),
        ("restart", "start a stopped or failed job again on its checkpoint (prints: JOB STATE)"),
    ):
        sub = actions.add_parser(name, help=text)
        sub.add_argument("job", metavar="JOB", help="the job id")
        sub.add_argument("--format", choices=("text", "json"), default="text", help="json: the whole status")
    delete = actions.add_parser("delete", help="forget a stopped or failed job")
    delete.add_argument("job", metavar="JOB", help="the job id")
    delete.add_argument(
        "--results",
        choices=("keep", "delete"),
        default="keep",
        help="keep (default: its directory moves to deleted/) or delete its results",
    )
    actions.add_parser("page", help="print a one-time link that opens the status page in a browser")
    result = actions.add_parser("result", help="show a job's result: table, changelog or tableau")
    result.add_argument("job", metavar="JOB", help="the job id")
    result.add_argument("--mode", choices=RESULT_MODES, default="table", help="default table")
    result.add_argument(
        "--follow",
        action="store_true",
        help="keep following until the job stops or fails (default: what is committed now, then exit)",
    )
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
    result.add_argument(
        "--after", type=int, metavar="POS", help="changelog/tableau: start after this position (pos)"
    )
    result.add_argument(
        "--from-token", metavar="TOKEN", help="changelog/tableau: resume from this token (c-....N)"
    )
    result.add_argument("--interval", type=float, default=1.0, help="seconds between polls (default 1)")
    result.add_argument(
        "--retry-seconds",
        type=float,
        default=120.0,
        metavar="S",
        help="keep retrying an unreachable or failing gateway this long (default 120)",
    )
    result.add_argument("--max-table-rows", type=positive_int, default=1000, metavar="N", help="rows held")
    result.add_argument(
        "--max-changelog-rows", type=positive_int, default=1000, metavar="N", help="changes held"
    )
    parser.set_defaults(run=run)
