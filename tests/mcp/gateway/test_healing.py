"""Upstream resets healed by the gateway: the fault proxy cuts the gateway's upstream
connections (a tool call's answer and every resumption) at random offsets inside 4 MiB
results with progress; downstream, the ssewire client and the official SDK client must
see every call once and whole: 0 torn, 0 duplicated, 0 hung."""

from __future__ import annotations

import asyncio
import os

import pytest

from ssewire.mcp.transport.serving import running
from tests.support.gateway_runs import gateway_over
from tests.support.resets import cut_share, reference_server, sdk_client, ssewire_client

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
    from tests.support.resets import Tally

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


def test_an_upstream_that_cannot_replay_gives_each_cut_call_an_explicit_error_never_a_hang():
    """The official Python SDK server with a store that cannot replay (it answers a
    resumption with an empty stream): through the gateway, the official client gets an
    explicit JSON-RPC error for each call whose answer was cut, and the rest intact."""
    import hashlib

    from tests.support.sdk_servers import probe_app, text_of_size

    size = 1 << 20
    arguments = {"count": 4, "size": size, "delay": 0.005}
    expected = hashlib.sha256(text_of_size(size).encode()).hexdigest()
    caller = sdk_client(None, arguments=arguments, expected=expected)
    with (
        running(probe_app(store=True, replays=False)) as root,
        gateway_over(root + "/mcp", cut_share(0.6, high=int(size * 1.6)), idle_timeout=2.0) as gw,
    ):
        tally = _tally(caller, gw.url, CALLS)
        cuts = gw.proxy.stats.cuts
    counts = tally.counts()
    assert counts["torn"] == counts["duplicated"] == counts["lost"] == counts["hung"] == 0, tally.reasons
    assert tally.failed >= 1 and tally.intact + tally.failed == CALLS  # every call: whole, or an error
    assert cuts >= tally.failed
    assert all("gateway" in reason or "cannot resume" in reason for reason in tally.reasons), tally.reasons
