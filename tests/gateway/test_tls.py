"""TLS (issue 31, item 5): the gateway serves HTTPS with ``--tls-certfile/--tls-keyfile`` (uvicorn's
own TLS), the client trusts a CA given with ``--cacert``, and a bind off loopback needs a token
and TLS. The certificate is made here with ``openssl`` (never a key in the repository)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from upsertmat.cli import main
from upsertmat.client.http import GatewayClient, GatewayError
from upsertmat.errors import CliError
from upsertmat.gateway.server import check_bind
from upsertmat.gateway.settings import GatewaySettings
from upsertmat.gateway.tls import PlainHttpNotice

from .conftest import serve_in_thread

TOKEN = "tls-token-91aa"


def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (P-256), valid for a day."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("openssl is not installed (Debian's openssl; .ci/run installs it)")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def closed_without_an_answer(connection: socket.socket) -> bool:
    """Whether the peer closed ``connection`` (an end of file or a reset) before sending a byte."""
    try:
        return connection.recv(1024) == b""
    except ConnectionResetError:
        return True


def test_https_with_a_generated_certificate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cert, key = certificate(tmp_path)
    settings = GatewaySettings(
        root=tmp_path / "root", port=0, token=TOKEN, tls_certfile=cert, tls_keyfile=key
    )
    logged: list[str] = []
    served = serve_in_thread(settings, log=logged.append, tls_certfile=cert, tls_keyfile=key)
    try:
        assert served.url.startswith("https://127.0.0.1:")
        with GatewayClient(served.url, TOKEN, cafile=cert) as client:
            assert client.info().tls
        with GatewayClient(served.url, TOKEN) as untrusted, pytest.raises(GatewayError) as refused:
            untrusted.info()  # the system's CAs do not know this certificate
        assert refused.value.status == 0
        assert logged == []
        # plain HTTP to the TLS port, on a real socket: no answer, the connection closed ...
        port = int(served.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as plain:
            plain.sendall(b"GET /v1/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            client_port = plain.getsockname()[1]
            assert closed_without_an_answer(plain)
        # ... and the gateway says so, once, naming the client (issue 45, item 5)
        assert logged == [
            f"plain HTTP on a TLS port from 127.0.0.1:{client_port}: the connection was closed "
            "without an answer; the client must use https://"
        ]
        with pytest.raises(httpx.HTTPError):  # a second one within the minute: counted, not logged
            httpx.get(served.url.replace("https://", "http://") + "/v1/info", timeout=30)
        assert len(logged) == 1
        assert main(["client", "--gateway", served.url, "--token", TOKEN, "--cacert", str(cert), "list"]) == 0
        capsys.readouterr()
    finally:
        served.stop()


def test_a_notice_without_the_clients_address_says_the_rest() -> None:
    logged: list[str] = []
    PlainHttpNotice(logged.append)(None)
    assert logged == [
        "plain HTTP on a TLS port: the connection was closed without an answer; the client must use https://"
    ]


def test_a_bind_off_loopback_needs_a_token_and_tls(tmp_path: Path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    for settings, refused in (
        (GatewaySettings(tmp_path, host="0.0.0.0"), "without a token"),
        (GatewaySettings(tmp_path, host="0.0.0.0", token="t"), "without TLS"),
    ):
        with pytest.raises(CliError) as error:
            check_bind(settings)
        assert refused in str(error.value) and error.value.code == 2
    check_bind(GatewaySettings(tmp_path, host="0.0.0.0", token="t", tls_certfile=cert, tls_keyfile=key))
    check_bind(GatewaySettings(tmp_path, host="0.0.0.0", token="t", plain_http=True))
    check_bind(GatewaySettings(tmp_path))  # loopback: neither needed


def openssl(*arguments: str) -> None:
    found = shutil.which("openssl")
    if found is None:
        pytest.fail("openssl is not installed (Debian's openssl; .ci/run installs it)")
    subprocess.run([found, *arguments], check=True, capture_output=True)


def gateway_with(tmp_path: Path, cert: Path, key: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "upsertmat", "gateway", "--data-root", str(tmp_path / "root"), "--port", "0",
         "--tls-certfile", str(cert), "--tls-keyfile", str(key)],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip


def test_tls_material_is_checked_before_anything_starts(tmp_path: Path) -> None:
    """Issue 45, item 4: a key that does not match its certificate was found by uvicorn after
    Spark had started (85 s, then a traceback, exit 70). Every case is one line, exit 2, and
    neither Spark nor the data root is touched."""
    cert, key = certificate(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    _, other_key = certificate(other)
    encrypted = tmp_path / "encrypted.pem"
    openssl("pkey", "-in", str(key), "-aes256", "-passout", "pass:s3cret", "-out", str(encrypted))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    missing = tmp_path / "missing.pem"
    cases = [
        (cert, other_key, f"the key in {other_key} does not belong to the certificate in {cert}"),
        (cert, encrypted, f"the key in {encrypted} is encrypted"),
        (garbage, key, f"--tls-certfile {garbage} holds no PEM certificate"),
        (cert, garbage, f"--tls-keyfile {garbage} holds no PEM private key"),
        (key, cert, f"--tls-certfile {key} holds no PEM certificate"),  # the two swapped
        (tmp_path, key, f"cannot read --tls-certfile {tmp_path}: Is a directory"),
        (cert, missing, f"cannot read --tls-keyfile {missing}: No such file"),
    ]
    for given_cert, given_key, words in cases:
        result = gateway_with(tmp_path, given_cert, given_key)
        assert result.returncode == 2, (words, result.stderr[-2000:])
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (words, result.stderr[-2000:])
        assert lines[0].startswith("upsertmat gateway: ")
        assert not (tmp_path / "root").exists()  # nothing started, not even the data root
