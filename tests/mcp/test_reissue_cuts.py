"""2026-07-28 answers cut mid-stream, healed by re-issue where repeating a call is safe.

The official Python SDK server (2026-07-28; both revisions at one URL) behind a fault
proxy cutting 60% or 90% of the tool calls' answers at random offsets (one upstream
connection per request, so keep-alive cannot dodge the cuts), four tools that differ only
in their annotations (``lookup`` read-only, ``upsert`` idempotent and not destructive,
``append`` none, ``remove`` destructive), and an upstream that counts how many times each
call ran. Driven by the official SDK client in its default mode (it negotiates 2026-07-28)
and by ssewire's ``Client``:

- through the gateway (the 2026-07-28 passthrough): read-only and idempotent calls all
  arrive whole, their progress once each and increasing; the plain and destructive calls
  never run twice, and each broken one ends with the explicit error;
- the client alone, by the same policy, the same;
- through the bridge, a 2026-07-28 client in front of the SDK server's 2025-11-25 side
  with an event store, cuts on its answers and on every resumption: every call whole.

``SSEWIRE_REISSUE_CALLS`` sets the calls per tool (6 by default; the issue's matrix is 20).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator

import pytest

from ssewire.mcp.bridge import Bridge, Settings
from ssewire.mcp.client import Client
from ssewire.mcp.gateway import Gateway
from ssewire.mcp.gateway.bridged import Bridged
from ssewire.mcp.protocol.reissue import OFF, ReissuePolicy
from ssewire.mcp.transport.serving import running
from tests.support.faultproxy import Cut
from tests.support.gateway_runs import gateway_over
from tests.support.reissue_cuts import (
    TOOLS,
    annotated_app,
    call_each,
    expected_text,
    is_tool_call,
    keys,
    runs_per_call,
    sdk_caller,
    served_behind_cuts,
    ssewire_caller,
)
from tests.support.resets import Tally, cut_share, no_keepalive_httpx

CALLS = int(os.environ.get("SSEWIRE_REISSUE_CALLS", "6"))
SIZE = 8192  # characters of each result (~22 KB on the wire): most cuts fall inside it
SAFE = ("lookup", "upsert")
UNSAFE = ("append", "remove")
WRONG = ("torn", "duplicated", "lost", "hung")


def clients(seed: int, **ssewire_options: object) -> dict[str, dict[str, object]]:
    """Per client kind, a caller per tool."""
    return {
        "mcp-sdk": {tool: sdk_caller(tool, CALLS, seed=seed, size=SIZE) for tool in TOOLS},
        "ssewire": {
            tool: ssewire_caller(tool, CALLS, seed=seed + 1, size=SIZE, **ssewire_options) for tool in TOOLS
        },
    }


def judged(tallies: dict[str, Tally], executions, seed: int) -> None:
    """What the goals ask: safe tools whole every time; unsafe ones never run twice and each
    broken call an explicit error; nothing torn, doubled, lost or hung anywhere."""
    for tool, tally in tallies.items():
        assert {k: getattr(tally, k) for k in WRONG} == dict.fromkeys(WRONG, 0), (tool, tally)
        if tool in SAFE:
            assert tally.intact == CALLS, (tool, tally.counts(), tally.reasons)
        else:
            assert tally.intact + tally.failed == CALLS, (tool, tally)
            runs = runs_per_call(executions, tool, keys(tool, CALLS, seed))
            assert max(runs.values()) <= 1, (tool, runs)


def explicit(tally: Tally) -> bool:
    """Every failure says the call may have run (the gateway's text, or the client's)."""
    return all("may have been processed" in reason for reason in tally.reasons)


@pytest.mark.parametrize("share", [0.6, pytest.param(0.9, marks=pytest.mark.slow)])
@pytest.mark.parametrize("kind", ["mcp-sdk", "ssewire"])
def test_through_the_gateway_safe_calls_are_healed_and_unsafe_ones_never_run_twice(kind, share):
    seed = 7 if share == 0.6 else 11
    with served_behind_cuts(share, seed) as (upstream, executions, proxy):
        with gateway_over(upstream, http=no_keepalive_httpx()) as gw:
            callers = clients(seed, reissue=OFF)[kind]  # the client's own re-issue off: the gateway heals
            tallies = call_each(callers, gw.url)  # type: ignore[arg-type]
            figures = gw.app.metrics.snapshot()
            exposition = gw.app.metrics.render().decode()
    seed = seed if kind == "mcp-sdk" else seed + 1
    judged(tallies, executions, seed)
    assert proxy.stats.cuts >= CALLS  # the cuts happened
    for tool in UNSAFE:  # the gateway's error, with its warning, when the answer broke
        if kind == "ssewire":
            assert explicit(tallies[tool]), tallies[tool].reasons
    for tool in SAFE:  # healed by re-issue, so some ran more than once; none never ran
        assert min(runs_per_call(executions, tool, keys(tool, CALLS, seed)).values()) >= 1
    assert figures["reissues_total:read-only"] >= 1 and figures["reissues_total:idempotent"] >= 1
    assert not any(
        key.startswith("reissues_total:") and key[15:] not in ("read-only", "idempotent", "method")
        for key in figures
    )
    assert 'ssewire_gateway_reissues_total{reason="read-only"}' in exposition


@pytest.mark.parametrize("share", [0.6, pytest.param(0.9, marks=pytest.mark.slow)])
def test_the_client_alone_heals_the_same_calls_by_the_same_policy(share):
    seed = 13 if share == 0.6 else 17
    with served_behind_cuts(share, seed) as (url, executions, proxy):
        tallies = call_each({tool: ssewire_caller(tool, CALLS, seed=seed, size=SIZE) for tool in TOOLS}, url)
    judged(tallies, executions, seed)
    assert proxy.stats.cuts >= CALLS
    for tool in SAFE:
        reasons = tallies[tool].client["reissue_reasons"]
        assert set(reasons) == {"read-only" if tool == "lookup" else "idempotent"}, reasons
    for tool in UNSAFE:
        assert tallies[tool].client["reissues"] == 0
        assert explicit(tallies[tool]), tallies[tool].reasons


@pytest.mark.slow
def test_the_operator_decides_what_is_safe_off_turns_annotations_away_a_list_names_tools():
    seed = 19
    with served_behind_cuts(0.9, seed) as (url, executions, _proxy):
        off = call_each({"lookup": ssewire_caller("lookup", CALLS, seed=seed, size=SIZE, reissue=OFF)}, url)
        listed = ReissuePolicy.of(annotations=False, tools=["append"], never=["lookup"])
        chosen = call_each(
            {
                tool: ssewire_caller(tool, CALLS, seed=seed + 1, size=SIZE, reissue=listed)
                for tool in ("append", "lookup")
            },
            url,
        )
    assert off["lookup"].client["reissues"] == 0 and off["lookup"].failed >= CALLS // 2
    assert max(runs_per_call(executions, "lookup", keys("lookup", CALLS, seed)).values()) <= 1
    assert chosen["append"].intact == CALLS  # the operator vouched for it
    assert chosen["lookup"].client["reissues"] == 0  # never, though read-only
    assert max(runs_per_call(executions, "lookup", keys("lookup", CALLS, seed + 1)).values()) <= 1


@contextlib.contextmanager
def bridged_over_cuts(share: float, seed: int) -> Iterator[tuple[str, Bridged, object, object]]:
    """A route for both revisions (the gateway, and the bridge for 2026-07-28 clients) in
    front of the SDK server's 2025-11-25 side with an event store, through a proxy cutting
    ``share`` of the tool calls' answers and of their resumptions (a GET with
    Last-Event-ID)."""
    plan = cut_share(share, seed, low=300, high=20000)  # answers and resumptions alike
    with served_behind_cuts(share, seed, store=True, plan=plan) as (upstream, executions, proxy):
        bridge = Bridge(
            upstream,
            upstream_revision="2025-11-25",
            settings=Settings(idle_timeout=10.0, timeout=60.0),
            http=no_keepalive_httpx(),
        )
        route = Bridged(Gateway(upstream, http=no_keepalive_httpx()), bridge)
        with running(route) as served:
            yield served + "/mcp", route, executions, proxy


@pytest.mark.parametrize("kind", ["mcp-sdk", "ssewire"])
def test_through_the_bridge_every_cut_2025_answer_is_resumed_whole_for_a_2026_client(kind):
    seed = 23
    with bridged_over_cuts(0.9, seed) as (url, route, executions, proxy):
        tallies = call_each(clients(seed)[kind], url)  # type: ignore[arg-type]
        figures = route.gateway.metrics.snapshot()  # the route's metrics carry the bridge's legs
        resumptions = figures["bridge_resumptions_total"]
        exposition = route.gateway.metrics.render().decode()
    for tool, tally in tallies.items():
        assert tally.intact == CALLS, (tool, tally.counts(), tally.reasons)
    assert proxy.stats.cuts >= CALLS and resumptions >= proxy.stats.cuts // 2
    assert f"ssewire_gateway_bridge_resumptions_total {resumptions:g}" in exposition
    assert figures["bridge_unsafe_resumptions_total"] == 0
    seed = seed if kind == "mcp-sdk" else seed + 1
    for tool in UNSAFE:  # resumed, never re-sent
        assert set(runs_per_call(executions, tool, keys(tool, CALLS, seed)).values()) == {1}, tool


@pytest.mark.slow
def test_through_the_bridge_a_2025_client_has_safe_calls_to_a_2026_upstream_healed():
    """The official client with sessions (its 2025 handshake) in front of the SDK server's
    2026-07-28 side: the bridge sends safe calls again as the passthrough does; the others
    end with its explicit error."""
    seed = 31
    callers = {tool: sdk_caller(tool, CALLS, seed=seed, size=SIZE, mode="legacy") for tool in TOOLS}
    with served_behind_cuts(0.9, seed) as (upstream, executions, proxy):
        bridge = Bridge(
            upstream,
            upstream_revision="2026-07-28",
            settings=Settings(timeout=60.0),
            http=no_keepalive_httpx(),
        )
        with running(bridge) as served:
            tallies = call_each(callers, served + "/mcp")  # type: ignore[arg-type]
            figures = bridge.figures()
    assert {tally.client["version"] for tally in tallies.values()} == {"2025-11-25"}  # the bridge's side
    judged(tallies, executions, seed)
    assert proxy.stats.cuts >= CALLS
    assert figures["reissues_total:read-only"] >= 1 and figures["reissues_total:idempotent"] >= 1
    for tool in UNSAFE:
        assert all("may have been processed" in reason for reason in tallies[tool].reasons), tallies[
            tool
        ].reasons


class FirstCuts:
    """Cut the first ``left`` tool calls' answers at ``at`` bytes (among the progress
    events), and the first ``lists`` listings' answers."""

    def __init__(self, left: int, at: int = 400, lists: int = 0) -> None:
        self.left, self.at, self.lists = left, at, lists

    def __call__(self, n: int, head: bytes) -> Cut | None:
        if self.left and is_tool_call(head):
            self.left -= 1
            return Cut(at=self.at)
        if self.lists and head.startswith(b"POST ") and b'"tools/list"' in head:
            self.lists -= 1
            return Cut(at=self.at)
        return None


def test_a_call_cut_before_any_listing_is_decided_by_the_gateways_own_and_its_progress_stays_increasing():
    """No client listed the tools: the first broken call of a read-only tool makes the
    gateway list them itself, then it is re-issued; its progress, cut after the first
    notification, reaches the client once each and increasing."""

    async def one_call(url: str) -> tuple[dict, list[float]]:
        progress: list[float] = []
        async with (
            no_keepalive_httpx() as http,
            Client(url, profile="2026-07-28", http=http, listen=False, reissue=OFF) as client,
        ):
            result = await client.call_tool(
                "lookup", {"key": "k", "size": SIZE}, on_progress=lambda p: progress.append(p["progress"])
            )
            return result, progress

    app, executions = annotated_app()
    cuts = FirstCuts(2, lists=1)  # the gateway's own listing is cut once too: it is a list, sent again
    with running(app) as root, gateway_over(root + "/mcp", cuts, http=no_keepalive_httpx()) as gw:
        result, progress = asyncio.run(one_call(gw.url))
        hints = gw.app.passthrough.reissuer.hints
        assert hints.safe("lookup") == "read-only" and hints.safe("remove") is None
        assert gw.proxy is not None and gw.proxy.stats.cuts == 3
    assert result["content"][0]["text"] == expected_text("k", SIZE)
    assert progress == [1, 2, 3]
    assert executions.runs("lookup")["k"] == 3  # two cut, the third whole
