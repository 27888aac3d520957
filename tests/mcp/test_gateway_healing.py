"""Upstream resets healed by the gateway: the fault proxy cuts the gateway's upstream
connections (a tool call's answer and every resumption) at random offsets inside 4 MiB
results with progress; downstream, the ssewire client and the official SDK client must
see every call once and whole: 0 torn, 0 duplicated, 0 hung."""

from __future__ import annotations

import asyncio
import os

import pytest

from ssewire.mcp.live.server import running

from .gateways import gateway_over
from .resets import cut_share, reference_server, sdk_client, ssewire_client

BAD = ("torn", "duplicated", "lost", "unsafe", "failed", "no_answer", "hung")
CALLS = int(os.environ.get("SSEWIRE_GATEWAY_CALLS", "8"))


def heal(caller, share: float, calls: int = CALLS, **options):
    with (
        running(reference_server(store_size=64)) as root,
        gateway_over(root + "/mcp", cut_share(share), **options) as gw,
    ):
        tally = _tally(caller, gw.url, calls)
        return tally, gw


def _tally(caller, url, calls):
    from .resets import Tally

    tally = Tally()
    asyncio.run(caller(url, calls, tally, 60.0))
    return tally


@pytest.mark.parametrize("share", [0.6, 0.9])
@pytest.mark.parametrize(
    "client",
    [
        pytest.param(lambda: ssewire_client(), id="ssewire"),
        pytest.param(lambda: sdk_client(None), id="mcp-sdk"),
    ],
)
def test_cut_upstream_connections_reach_every_client_whole_and_once(client, share):
    tally, gw = heal(client(), share)
    counts = tally.counts()
    assert {k: counts[k] for k in BAD} == dict.fromkeys(BAD, 0), tally.reasons
    assert tally.intact == CALLS
    figures = gw.app.metrics.snapshot()
    assert gw.proxy is not None and gw.proxy.stats.cuts >= CALLS // 2  # the cuts happened
    assert figures["resumptions_total"] >= gw.proxy.stats.cuts - figures["reissues_total"]
    assert figures["calls_failed_total"] == 0
