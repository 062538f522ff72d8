"""TLS: the certificate and key checked before the gateway starts anything, and plain HTTP sent
to the TLS port noticed.

:func:`check_tls` runs before the data root, its lock and Spark: both files readable, the
certificate PEM, the key PEM and not encrypted (the gateway could only ask for its passphrase on
a terminal it may not have), and the key the one of the certificate. Each problem is one line
(:class:`~upsertmat.errors.CliError`, exit 2) naming the file; what would otherwise surface from
uvicorn after Spark's start, as a traceback. Loads both once with Python's own ``ssl``
(OpenSSL), as uvicorn will. O(size of the files).

:func:`notice_plain_http`: a client that speaks plain HTTP to the TLS port (``http://`` for
``https://``) fails the TLS handshake and its connection is closed without an answer (there is
no TLS session to answer in), which asyncio does not log; the gateway logs one line for it,
naming the client's address, at most one a minute (with how many since the last).
"""

from __future__ import annotations

import asyncio.sslproto
import inspect
import re
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import CliError, ExitCode

_PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )?PRIVATE KEY-----")


class _Encrypted(Exception):
    """OpenSSL asked for the key's passphrase."""


def _read(path: Path, option: str) -> str:
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError as error:
        raise CliError(f"cannot read {option} {path}: {error.strerror or error}", ExitCode.USAGE) from None


def _no_passphrase() -> str:
    raise _Encrypted


def check_tls(certfile: Path, keyfile: Path) -> None:
    """CliError (usage) unless ``certfile`` holds a PEM certificate (its chain may follow) and
    ``keyfile`` the unencrypted PEM private key that belongs to it."""
    cert_text = _read(certfile, "--tls-certfile")
    key_text = _read(keyfile, "--tls-keyfile")
    if "-----BEGIN CERTIFICATE-----" not in cert_text:
        raise CliError(
            f"--tls-certfile {certfile} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            ExitCode.USAGE,
        )
    if "-----BEGIN ENCRYPTED PRIVATE KEY-----" in key_text or "Proc-Type: 4,ENCRYPTED" in key_text:
        raise _encrypted(keyfile)
    if _PRIVATE_KEY.search(key_text) is None:
        raise CliError(
            f"--tls-keyfile {keyfile} holds no PEM private key (-----BEGIN PRIVATE KEY-----)", ExitCode.USAGE
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(certfile, keyfile, password=_no_passphrase)
    except _Encrypted:
        raise _encrypted(keyfile) from None
    except ssl.SSLError as error:
        if error.reason == "KEY_VALUES_MISMATCH":
            raise CliError(
                f"the key in {keyfile} does not belong to the certificate in {certfile} "
                "(KEY_VALUES_MISMATCH): give the key the certificate was made for",
                ExitCode.USAGE,
            ) from None
        raise CliError(
            f"cannot use --tls-certfile {certfile} with --tls-keyfile {keyfile}: {error.reason or error}",
            ExitCode.USAGE,
        ) from None


def _encrypted(keyfile: Path) -> CliError:
    return CliError(
        f"the key in {keyfile} is encrypted (it has a passphrase, which the gateway cannot ask for): "
        f"write it without one, e.g. openssl pkey -in {keyfile} -out key.pem",
        ExitCode.USAGE,
    )


NOTICE_SECONDS = 60.0


class PlainHttpNotice:
    """Logs that plain HTTP reached the TLS port, from which address (``None``: not known): the
    first time at once, then at most once per :data:`NOTICE_SECONDS` with the count since the
    last line. Thread-safe; O(1)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.lock = threading.Lock()
        self.unsaid = 0
        self.said = -NOTICE_SECONDS

    def __call__(self, peer: str | None = None) -> None:
        with self.lock:
            self.unsaid += 1
            now = time.monotonic()
            if now - self.said < NOTICE_SECONDS:
                return
            count, self.unsaid, self.said = self.unsaid, 0, now
        times = "" if count == 1 else f" ({count} connections since the last notice)"
        where = "" if peer is None else f" from {peer}"
        self.log(
            f"plain HTTP on a TLS port{where}: the connection was closed without an answer; "
            f"the client must use https://{times}"
        )


def _peer() -> str | None:
    """The client address (``HOST:PORT``, ``[V6]:PORT``) of the connection whose handshake is
    running: asyncio's TLS protocol object is the one calling ``do_handshake`` (an
    ``SSLObject`` knows only its memory buffers), found among the few frames above. None when
    it is not there (another event loop, uvloop's compiled one)."""
    frame = inspect.currentframe()
    for _ in range(8):
        if frame is None:
            return None
        caller = frame.f_locals.get("self")
        if isinstance(caller, asyncio.sslproto.SSLProtocol):
            transport = getattr(caller, "_transport", None)
            peer = None if transport is None else transport.get_extra_info("peername")
            if isinstance(peer, tuple) and len(peer) >= 2:
                host = str(peer[0])
                return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
            return None
        frame = frame.f_back
    return None


def notice_plain_http(context: ssl.SSLContext, notice: Callable[[str | None], None]) -> None:
    """Make ``context``'s server connections call ``notice(peer)`` when a handshake fails because
    the client sent plain HTTP (OpenSSL's ``HTTP_REQUEST``); ``peer``: the client's address, if
    known. The connection still fails as before. Through ``SSLContext.sslobject_class``, the
    documented hook for asyncio's TLS."""

    class Noticing(ssl.SSLObject):
        def do_handshake(self) -> None:
            try:
                super().do_handshake()
            except ssl.SSLError as error:
                if error.reason == "HTTP_REQUEST":
                    notice(_peer())
                raise

    context.sslobject_class = Noticing
