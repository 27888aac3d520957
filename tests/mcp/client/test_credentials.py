"""A server that needs credentials: the probe sends them from ``--header`` or ``--header-env``
and keeps them out of every report and recording; the client takes headers or an httpx auth."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import httpx
import pytest

from ssewire.mcp.checks.report import READY
from ssewire.mcp.client import Client
from ssewire.mcp.reference.server import ReferenceServer
from ssewire.mcp.transport.serving import running

SECRET = "s3cret-token-0042"  # made up for this test; asserted absent from what is written


class BearerOnly:
    """An ASGI app in front of the reference server that answers 401 without the token."""

    def __init__(self, app, *, expected: str) -> None:
        self.app, self.expected = app, expected.encode()
        self.refused = 0

    async def __call__(self, scope, receive, send):
        preflight = scope["type"] == "http" and scope["method"] == "OPTIONS"  # a CORS preflight carries none
        if (
            scope["type"] == "http"
            and not preflight
            and dict(scope["headers"]).get(b"authorization") != self.expected
        ):
            self.refused += 1
            await send(
                {"type": "http.response.start", "status": 401, "headers": [(b"www-authenticate", b"Bearer")]}
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def guarded():
    server = ReferenceServer(keepalive=0.25, countdown_delay=0.02)
    app = BearerOnly(server, expected=f"Bearer {SECRET}")
    with running(app) as base:
        yield base + server.path, app


def probe_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ssewire", "probe", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_without_credentials_the_probe_says_it_cannot_probe(guarded):
    url, app = guarded
    done = probe_cli(url, "--idle-check", "0.5", "--timeout", "3")
    assert app.refused > 0
    assert done.returncode == 2 and done.stderr.startswith("ssewire probe: cannot probe"), done.stderr


@pytest.mark.parametrize("source", ["--header", "--header-env"])
def test_the_probe_sends_credentials_and_writes_their_name_only(guarded, tmp_path, source):
    url, app = guarded
    refused = app.refused
    record = tmp_path / "probe.json"
    line = f"Authorization: Bearer {SECRET}"
    given = ["--header", line] if source == "--header" else ["--header-env", "MCP_AUTH"]
    done = probe_cli(
        url,
        *given,
        "--header",
        "X-Trace: probe-1",
        "--call-tools",
        "countdown,structured",
        "--idle-check",
        "0.8",
        "--format",
        "json",
        "--record",
        str(record),
        env={"MCP_AUTH": line},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["release"] == READY, done.stdout
    assert app.refused == refused  # every request carried the credentials
    assert report["figures"]["headers_sent"] == ["Authorization", "X-Trace"]
    written = record.read_text()
    assert SECRET not in done.stdout + done.stderr + written
    first = json.loads(written)["exchanges"][0]["request"]["headers"]
    assert first["Authorization"] == "<redacted>" and first["X-Trace"] == "<redacted>"
    assert (
        subprocess.run(
            [sys.executable, "-m", "ssewire", "validate", str(record)], capture_output=True
        ).returncode
        == 0
    )


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ["--header", "X-Key: k", "--header", f"Authorization Bearer {SECRET}"],
            {},
            "--header #2: not a header field: expected 'Name: value', found no colon",
        ),
        (["--header-env", "BAD"], {"BAD": f"Bearer {SECRET}"}, "--header-env BAD: not a header field"),
        (["--header", f"{SECRET} x: y"], {}, "--header #1: not a header name ("),
        (
            ["--header", "authorization: a", "--header", "Authorization: b"],
            {},
            "authorization is given twice (header names are case-insensitive)",
        ),
        (["--header", "Accept: */*"], {}, "Accept is set by the MCP transport itself"),
        (
            ["--header-env", "SSEWIRE_TEST_UNSET"],
            {},
            "--header-env SSEWIRE_TEST_UNSET: the environment variable is not set",
        ),
        (
            ["--header-env", "BAD"],
            {"BAD": "X-Key: a\rInjected: 1"},
            "--header-env BAD: the value of X-Key holds CR, LF or NUL",
        ),
    ],
)
def test_a_bad_header_is_one_line_and_exit_2_without_its_value(args, env, message):
    done = probe_cli("http://127.0.0.1:9/mcp", *args, env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr
    assert "Injected" not in done.stderr and SECRET not in done.stderr  # no part of a value is echoed


def _call(url: str, **options):
    async def go():
        async with Client(url, profile="2025-11-25", timeout=10, idle_timeout=5, **options) as client:
            return await client.call_tool("countdown", {"n": 3})

    return asyncio.run(go())


class TokenAuth(httpx.Auth):
    def auth_flow(self, request):
        request.headers["Authorization"] = f"Bearer {SECRET}"
        yield request


@pytest.mark.parametrize("credentials", ["headers", "auth"])
def test_the_client_sends_headers_or_an_httpx_auth(guarded, credentials):
    url, _ = guarded
    given = (
        {"headers": {"Authorization": f"Bearer {SECRET}"}}
        if credentials == "headers"
        else {"auth": TokenAuth()}
    )
    result = _call(url, **given)
    assert result["content"][0]["text"]
    with pytest.raises(httpx.HTTPStatusError, match="401"):
        _call(url)


def test_the_client_refuses_transport_headers_and_headers_beside_its_own_http():
    with pytest.raises(ValueError, match="Mcp-Session-Id is set by the MCP transport itself"):
        Client("http://127.0.0.1:9/mcp", headers={"Mcp-Session-Id": "x"})
    own = httpx.AsyncClient()
    with pytest.raises(ValueError, match=r"your own httpx\.AsyncClient"):
        Client("http://127.0.0.1:9/mcp", headers={"X-Key": "k"}, http=own)
    asyncio.run(own.aclose())
