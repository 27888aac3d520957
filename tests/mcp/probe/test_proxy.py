"""The live half behind a real reverse proxy: nginx in front of the reference server and the
official Python SDK server. In the compressing configuration many deployments use (gzip on
``text/event-stream`` and JSON) the client and the probe read bodies as the httpx adapter
does (content-encoding undone), so the proxy changes the bytes, not the events; the probe
names the compression. In configurations with a short idle timeout, a rewritten Host, and
none of these, the probe names each intermediary's doing, and nothing on the clean one."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from ssewire.mcp.checks.findings import Level, Status
from ssewire.mcp.checks.report import READY, REVIEW
from ssewire.mcp.client import Client
from ssewire.mcp.probe.driver import run_probe
from ssewire.mcp.reference.server import ReferenceServer
from ssewire.mcp.reference.tools import filler
from ssewire.mcp.transport.serving import running
from tests.support.mcp_helpers import INITIALIZE
from tests.support.nginx import nginx_binary, nginx_proxy
from tests.support.resets import MIB
from tests.support.sdk_servers import probe_app, text_of_size

pytestmark = pytest.mark.usefixtures("nginx")
FAST = {"keepalive": 0.25, "countdown_delay": 0.02}


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
    assert result["content"][0]["text"] == filler(MIB)
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
def test_the_probe_names_the_compression_and_says_the_rest_as_directly(profile):
    """Every other verdict as when probing the server directly (the proxy passes what it is
    given); the compression of the event streams is named as a buffering risk."""

    def probe(url):
        return run_probe(url, call_tools={"countdown"}, idle_check=0.8, timeout=5.0)

    server = ReferenceServer(profile=profile, **FAST)
    with running(server) as base:
        direct = probe(base + "/mcp")
        with nginx_proxy(base) as proxy:
            proxied = probe(proxy + "/mcp")
    assert proxied.version == direct.version == profile
    seen, through = verdicts(direct), verdicts(proxied)
    assert seen.pop("stream.compressed") == ("pass", "warning")
    assert through.pop("stream.compressed") == ("detected", "warning")
    assert through == seen
    found = next(v for v in proxied.verdicts if v.id == "stream.compressed")
    assert found.evidence["encodings"] == ["gzip"] and found.evidence["intermediary"] == [
        "server: nginx/1.22.1"
    ]
    assert direct.release == READY and proxied.release == REVIEW


# -- intermediaries named: nginx configurations the probe must tell apart ----------------------

IDLE_TIMEOUT = 1.0  # nginx's proxy_read_timeout in the idle configuration (seconds)
SLOW_KEEPALIVE = 3.0  # the server's keep-alive interval there: longer than nginx waits
CONFIGURATIONS = {  # name: (the server's options, nginx's options, the probe's idle window)
    "idle-timeout": ({"keepalive": SLOW_KEEPALIVE}, {"gzip": False, "read_timeout": IDLE_TIMEOUT}, 2.5),
    "host-rewritten": ({}, {"gzip": False, "rewrite_host": True}, 0.8),
    "clean": ({}, {"gzip": False}, 0.8),
}


@pytest.fixture(scope="module")
def configured():
    """The reference server probed through each configuration, three at a time."""

    def probe(name):
        options, proxy_options, idle_check = CONFIGURATIONS[name]
        server = ReferenceServer(**{**FAST, **options})
        with running(server) as base, nginx_proxy(base, **proxy_options) as proxy:
            return run_probe(proxy + "/mcp", call_tools={"countdown"}, idle_check=idle_check, timeout=5.0)

    with ThreadPoolExecutor(3) as pool:
        return dict(zip(CONFIGURATIONS, pool.map(probe, CONFIGURATIONS), strict=True))


def test_a_proxy_idle_timeout_shorter_than_the_keepalive_is_named(configured):
    report = configured["idle-timeout"]
    assert report.detected() == {"stream.idle-closed", "stream.keepalive-missing"}, report.to_text()
    found = {v.id: v for v in report.verdicts}
    closed = found["stream.idle-closed"]
    assert closed.status == Status.DETECTED
    assert closed.evidence["ended_by"] == "an intermediary (server: nginx/1.22.1), on an idle timeout"
    assert closed.evidence["rests_on"][0] == (
        "the connection broke inside the chunked body (RemoteProtocolError), without the body's end"
    )
    # nginx ends it after its timeout of silence, before the server's first keep-alive was due
    assert IDLE_TIMEOUT - 0.2 <= closed.evidence["silence_before_end_s"] < SLOW_KEEPALIVE  # clocks differ
    assert found["stream.keepalive-missing"].status == Status.SUSPECTED  # unseen in 1 s, not proven missing
    assert re.match(r"cut after \d+\.\d s, by an intermediary", report.figures["get_stream_end"])
    assert "keepalive_interval_s" not in report.figures  # none came before the cut


def test_a_proxy_that_rewrites_host_is_named(configured):
    report = configured["host-rewritten"]
    assert report.detected() == {"security.dns-rebinding", "security.host-rewritten"}, report.to_text()
    found = {v.id: v for v in report.verdicts}
    assert found["security.host-rewritten"].status == Status.SUSPECTED
    assert found["security.host-rewritten"].evidence["rests_on"][-1] == (
        "the answers name an intermediary: server: nginx/1.22.1"
    )
    assert found["security.dns-rebinding"].level == Level.WARNING  # the Origin check still holds


def test_a_clean_proxy_is_named_for_nothing(configured):
    report = configured["clean"]
    assert report.detected() == set(), report.to_text()
    assert report.release == READY
    figures = report.figures
    assert figures["get_stream_end"] == "open when the 0.8 s watch ended"
    assert figures["keepalive_interval_s"] < 0.8 and figures["keepalive_intervals_lived"] > 1


def test_the_sdk_server_behind_a_host_rewriting_proxy():
    """The official SDK refuses a foreign Host with 421 directly; nginx rewriting Host to the
    upstream's own address leaves that check blind, and the probe says so."""
    with running(probe_app()) as base:
        with nginx_proxy(base, gzip=False) as proxy:
            passed_on = run_probe(proxy + "/mcp", idle_check=0.5, timeout=5.0)
        with nginx_proxy(base, gzip=False, rewrite_host=True) as proxy:
            rewritten = run_probe(proxy + "/mcp", idle_check=0.5, timeout=5.0)
    assert verdicts(passed_on)["security.host-rewritten"] == ("pass", "warning")
    assert verdicts(rewritten)["security.host-rewritten"] == ("suspected", "warning")
    assert verdicts(rewritten)["security.dns-rebinding"] == ("detected", "warning")
