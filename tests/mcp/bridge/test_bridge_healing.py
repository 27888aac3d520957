"""Upstream resets healed through the bridge: 2026-07-28 clients in front of a 2025-11-25
upstream with an event store (the reference server), the fault proxy cutting the bridge's
upstream connections (a tool call's answer and every resumption) at random offsets inside
4 MiB results with progress. The bridge's upstream sessions are the client's engine, so each
cut answer is resumed with Last-Event-ID through the guard: every call arrives once and
whole, its progress once each, or (never here) as an explicit error; none hangs."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from ssewire.mcp.bridge import Bridge, Settings
from ssewire.mcp.transport.serving import running
from tests.support.faultproxy import FaultProxy, fault_proxy
from tests.support.resets import (
    Caller,
    Tally,
    cut_share,
    no_keepalive_httpx,
    reference_server,
    sdk_client,
    ssewire_client,
)

BAD = ("torn", "duplicated", "lost", "unsafe", "failed", "no_answer", "hung")
CALLS = int(os.environ.get("SSEWIRE_BRIDGE_CALLS", "8"))


@contextlib.contextmanager
def bridged_over_cuts(share: float) -> Iterator[tuple[str, Bridge, FaultProxy]]:
    """The bridge's MCP URL, to stateless clients, in front of a fault proxy cutting ``share``
    of its tool-call connections to the reference server (one connection per request, so
    the proxy's plan is a per-request plan)."""
    with (
        running(reference_server(store_size=64)) as root,
        fault_proxy(urlsplit(root).port or 80, cut_share(share)) as proxy,
    ):
        settings = Settings(idle_timeout=10.0, timeout=60.0)
        bridge = Bridge(
            f"http://127.0.0.1:{proxy.port}/mcp",
            upstream_revision="2025-11-25",
            settings=settings,
            http=no_keepalive_httpx(),
        )
        with running(bridge) as served:
            yield served + "/mcp", bridge, proxy


def tally_of(caller: Caller, url: str) -> Tally:
    tally = Tally()
    asyncio.run(caller(url, CALLS, tally, 60.0))
    return tally


@pytest.mark.parametrize("share", [0.6, 0.9])
@pytest.mark.parametrize(
    "client",
    [
        pytest.param(lambda: ssewire_client(profile="2026-07-28"), id="ssewire-2026"),
        pytest.param(lambda: sdk_client(None, mode="default"), id="mcp-sdk-2026"),
    ],
)
def test_cut_upstream_answers_reach_a_2026_client_through_the_bridge_whole_and_once(client, share):
    with bridged_over_cuts(share) as (url, bridge, proxy):
        tally = tally_of(client(), url)
        assert bridge.sessions_mode is not None
        engines = [s.engine for s in bridge.sessions_mode.sessions.values() if s.engine is not None]
        resumptions = sum(engine.statistics()["resumptions"] for engine in engines)
    counts = tally.counts()
    assert {k: counts[k] for k in BAD} == dict.fromkeys(BAD, 0), tally.reasons
    assert tally.intact == CALLS
    assert proxy.stats.cuts >= CALLS // 2  # the cuts happened
    assert resumptions >= proxy.stats.cuts // 2  # and the bridge's engine resumed them
