"""The live half behind a real reverse proxy: nginx, in the compressing configuration many
deployments use (gzip on ``text/event-stream`` and JSON), in front of the reference server
and the official Python SDK server. The client and the probe read bodies as the httpx
adapter does (content-encoding undone), so the proxy changes the bytes, not the events."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from ssewire.mcp.live.client import Client
from ssewire.mcp.live.probe import run_probe
from ssewire.mcp.live.server import ReferenceServer, _filler, running

from ..nginx import nginx_binary, nginx_proxy
from .resets import MIB
from .sdk_servers import probe_app, text_of_size

pytestmark = pytest.mark.usefixtures("nginx")
FAST = {"keepalive": 0.25, "countdown_delay": 0.02}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@pytest.fixture(scope="module")
def nginx() -> str:
    return nginx_binary()  # skips (or fails under SSEWIRE_REQUIRE_NGINX=1) without nginx


def verdicts(report) -> dict[str, tuple[str, str]]:
    return {v["id"]: (v["status"], v["level"]) for v in report.as_dict()["verdicts"]}


@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
def test_the_proxy_compresses_the_answers(json_response):
    """The configuration really compresses (else the tests below would prove nothing)."""
    server = ReferenceServer(json_response=json_response, **FAST)
    with running(server) as base, nginx_proxy(base) as proxy:
        headers = {"Accept": "application/json, text/event-stream", "Accept-Encoding": "gzip"}
        with httpx.Client(timeout=10) as http:
            with http.stream("POST", proxy + "/mcp", json=INITIALIZE, headers=headers) as response:
                raw = b"".join(response.iter_raw())
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"
    assert raw[:2] == b"\x1f\x8b"  # gzip's magic number: the bytes on the wire are compressed


@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
def test_the_client_reads_through_a_compressing_proxy(json_response):
    async def main(url):
        seen = []
        async with Client(url) as client:
            result = await client.call_tool("countdown", {"count": 10, "size": MIB}, on_progress=seen.append)
            return client, seen, result

    server = ReferenceServer(json_response=json_response, **FAST)
    with running(server) as base, nginx_proxy(base) as proxy:
        client, seen, result = asyncio.run(main(proxy + "/mcp"))
    assert client.version == "2025-11-25" and client.session is not None
    # the reference server's JSON mode sends no progress (a JSON answer carries one message)
    assert [p["progress"] for p in seen] == ([] if json_response else list(range(1, 11)))
    assert result["content"][0]["text"] == _filler(MIB)
    assert client.statistics()["resets"] == 0


def test_the_client_reads_the_sdk_server_through_a_compressing_proxy():
    async def main(url):
        seen = []
        async with Client(url, listen=False) as client:
            result = await client.call_tool("countdown", {"count": 5, "size": MIB}, on_progress=seen.append)
            return seen, result

    with running(probe_app()) as base, nginx_proxy(base) as proxy:
        seen, result = asyncio.run(main(proxy + "/mcp"))
    assert [p["progress"] for p in seen] == [1, 2, 3, 4, 5]
    assert result["content"][0]["text"] == text_of_size(MIB)


@pytest.mark.parametrize("profile", ["2025-11-25", "2026-07-28"])
def test_the_probe_says_the_same_through_a_compressing_proxy(profile):
    """Every verdict as when probing the server directly (the proxy passes what it is given)."""

    def probe(url):
        return run_probe(url, call_tools={"countdown"}, idle_check=0.8, timeout=5.0)

    server = ReferenceServer(profile=profile, **FAST)
    with running(server) as base:
        direct = probe(base + "/mcp")
        with nginx_proxy(base) as proxy:
            proxied = probe(proxy + "/mcp")
    assert proxied.version == direct.version == profile
    assert verdicts(proxied) == verdicts(direct)
    assert proxied.release == direct.release
