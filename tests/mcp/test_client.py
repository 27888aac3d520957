"""The client session against the reference server, directly and through the fault proxy:
routing, progress, server-to-client requests, re-initialization, and resumption that
never delivers a torn or duplicated message."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
from urllib.parse import urlsplit

import httpx
import pytest

from ssewire.mcp.guard import UnsafeResumption
from ssewire.mcp.live.client import Client, StreamBroken
from ssewire.mcp.live.server import ReferenceServer, _filler, running

from ..faultproxy import Cut, fault_proxy

MIB = 1 << 20


def server(**options) -> ReferenceServer:
    # retry 10 ms: the client honours it before each resumption
    return ReferenceServer(**{"keepalive": 0.2, "countdown_delay": 0.005, "retry_ms": 10, **options})


def text_of(result: dict) -> str:
    return result["content"][0]["text"]


def parse_reference_id(event_id: str):
    stream, _, seq = event_id.partition("-")
    return (stream, int(seq)) if stream.isdigit() and seq.isdigit() else None


def test_a_call_with_progress_and_a_multi_megabyte_result():
    async def main(url):
        seen = []
        async with Client(url) as client:
            result = await client.call_tool(
                "countdown", {"count": 10, "size": 2 * MIB}, on_progress=seen.append
            )
            return client, seen, result

    app = server()
    with running(app) as base:
        client, seen, result = asyncio.run(main(base + "/mcp"))
    assert client.version == "2025-11-25" and client.session is not None
    assert [p["progress"] for p in seen] == list(range(1, 11))
    assert text_of(result) == _filler(2 * MIB)
    stats = client.statistics()
    assert stats["resets"] == 0 and stats["ttfb_s"] and len(stats["progress_gaps_s"]) == 9


def test_two_concurrent_calls_get_their_own_progress_and_results():
    async def main(url):
        first, second = [], []
        async with Client(url) as client:
            results = await asyncio.gather(
                client.call_tool("countdown", {"count": 8, "size": 10}, on_progress=first.append),
                client.call_tool("countdown", {"count": 5, "size": 20}, on_progress=second.append),
            )
        return first, second, results

    with running(server()) as base:
        first, second, results = asyncio.run(main(base + "/mcp"))
    assert [p["progress"] for p in first] == list(range(1, 9))
    assert [p["progress"] for p in second] == list(range(1, 6))
    assert [len(text_of(r)) for r in results] == [10, 20]


def test_a_sampling_request_from_the_server_is_answered_by_the_handler():
    async def main(url):
        async def sample(params):
            question = params["messages"][0]["content"]["text"]
            return {
                "role": "assistant",
                "content": {"type": "text", "text": question.upper()},
                "model": "echo",
            }

        async with Client(url, handlers={"sampling/createMessage": sample}) as client:
            return await client.call_tool("ask", {"question": "why?"})

    with running(server()) as base:
        result = asyncio.run(main(base + "/mcp"))
    assert '"WHY?"' in text_of(result)


def test_an_expired_session_is_reinitialized_and_said_so():
    async def main(url, app):
        async with Client(url) as client:
            first = client.session
            await client.call_tool("echo", {"text": "a"})
            app.sessions.clear()  # the server forgot the session: the next request gets 404
            result = await client.call_tool("echo", {"text": "b"})
            return first, client.session, client.statistics(), result

    app = server()
    with running(app) as base:
        first, second, stats, result = asyncio.run(main(base + "/mcp", app))
    assert first != second and stats["reinitializations"] == 1
    assert text_of(result) == "b"


def test_keep_alive_comments_count_as_life_on_the_get_stream():
    async def main(url):
        async with Client(url, idle_timeout=1.0) as client:
            await asyncio.sleep(0.7)
            return client.statistics()

    with running(server()) as base:
        stats = asyncio.run(main(base + "/mcp"))
    assert stats["keepalives"] >= 2 and stats["idle_timeouts"] == 0


def test_the_2026_07_28_stateless_mode():
    async def main(url):
        async with Client(url) as client:
            result = await client.call_tool(
                "countdown", {"count": 3, "size": 100}, on_progress=lambda p: None
            )
            return client, result

    with running(server(profile="2026-07-28")) as base:
        client, result = asyncio.run(main(base + "/mcp"))
    assert client.version == "2026-07-28" and client.session is None
    assert len(text_of(result)) == 100


# -- resets: through the fault proxy ------------------------------------------------------


def _through_proxy(app: ReferenceServer, plan, calls: int, **client_options):
    """``calls`` countdown calls through a proxy that cuts answers as ``plan`` says."""
    outcome = {"intact": 0, "torn": 0, "duplicated": 0, "unsafe": 0, "failed": 0, "no_answer": 0, "hung": 0}
    expected = hashlib.sha256(_filler(4 * MIB).encode()).hexdigest()

    async def main(url):
        # one connection per request, so the proxy's per-connection plan is a per-request plan
        http = httpx.AsyncClient(
            timeout=httpx.Timeout(60, read=None), limits=httpx.Limits(max_keepalive_connections=0)
        )
        # 2025-11-25 straight away: connections 0 and 1 are initialize and initialized
        async with (
            http,
            Client(url, profile="2025-11-25", listen=False, http=http, **client_options) as client,
        ):
            for _ in range(calls):
                progress = []
                try:
                    result = await client.call_tool(
                        "countdown", {"count": 4, "size": 4 * MIB}, on_progress=progress.append
                    )
                except UnsafeResumption:
                    outcome["unsafe"] += 1
                    continue
                except StreamBroken as broken:
                    # before any answer began, the request may or may not have been processed:
                    # reported, never replayed; anything later is a failure to resume
                    outcome["no_answer" if "before an answer" in str(broken) else "failed"] += 1
                    continue
                except TimeoutError:
                    outcome["hung"] += 1  # a wait that met the request's deadline
                    continue
                got = hashlib.sha256(text_of(result).encode()).hexdigest()
                outcome["intact" if got == expected else "torn"] += 1
                ticks = [p["progress"] for p in progress]
                if len(ticks) != len(set(ticks)):
                    outcome["duplicated"] += 1
            return client.statistics()

    with running(app) as base, fault_proxy(urlsplit(base).port, plan) as proxy:
        stats = asyncio.run(main(f"http://127.0.0.1:{proxy.port}/mcp"))
    return outcome, stats, proxy.stats


def test_500_resets_across_4_mib_results_deliver_every_result_once_and_whole(capsys):
    """Connections of tool calls are cut at random offsets of their answers (inside the
    4 MiB event, a CRLF or a character, wherever it falls) until 500 resets happened; the
    store keeps every event, so every call must complete, byte-identical, exactly once.

    The cuts fall after the first kilobyte (headers and the priming event): a cut before
    any event with an id leaves nothing to resume from, and is the next test's case."""
    rng = random.Random(2026)
    resets = int(os.environ.get("SSEWIRE_RESETS", "500"))

    def plan(n: int) -> Cut | None:
        if n < 2 or plan.done >= resets or rng.random() >= 0.8:  # 0, 1: initialize, initialized
            return None
        plan.done += 1
        return Cut(at=rng.randint(1024, 4 * MIB + 2000))

    plan.done = 0
    calls = max(10, resets * 3 // 10)  # about four cuts a call: enough calls for every reset
    outcome, stats, proxied = _through_proxy(server(store_size=64), plan, calls=calls, max_resumptions=64)
    with capsys.disabled():
        print(
            f"\n{resets} resets, ssewire Client: {outcome}; resumptions {stats['resumptions']}, "
            f"idle timeouts {stats['idle_timeouts']}"
        )
    # never a torn or duplicated result, never a hang, never a failed resumption; a call
    # whose answer never began (the connection died before it: no client can recover that
    # without re-sending) is reported, and counted here
    bad = ("torn", "duplicated", "unsafe", "failed", "hung")
    assert {k: outcome[k] for k in bad} == dict.fromkeys(bad, 0)
    assert outcome["intact"] == calls - outcome["no_answer"] and outcome["no_answer"] <= calls // 50
    assert proxied.cuts >= resets - outcome["no_answer"]


def test_a_cut_before_any_event_id_is_reported_not_replayed():
    """Nothing to resume from and a request not declared idempotent: the call fails
    (do-not-replay); nothing torn is delivered and nothing is sent twice."""

    def plan(n: int) -> Cut | None:
        return Cut(at=150) if n >= 2 else None  # inside the headers or the priming event

    outcome, stats, proxied = _through_proxy(server(), plan, calls=5)
    assert outcome == {
        "intact": 0,
        "torn": 0,
        "duplicated": 0,
        "unsafe": 0,
        "failed": 0,
        "no_answer": 5,
        "hung": 0,
    }
    assert proxied.connections == 2 + 5 + 1  # initialize, initialized, one POST a call, DELETE
    assert stats["resumptions"] == 0


def test_an_evicting_store_surfaces_as_unsafe_never_as_a_torn_result():
    """A store of 2 events: a cut before the result leaves the cursor evicted; the server
    refuses with 409, and the client raises instead of delivering anything."""
    rng = random.Random(7)

    def plan(n: int) -> Cut | None:
        return None if n < 2 else Cut(at=rng.randint(1, 300))  # early: before the result

    outcome, stats, _ = _through_proxy(
        server(store_size=2, countdown_delay=0.02, retry_ms=300), plan, calls=20
    )
    assert outcome["torn"] == 0 and outcome["duplicated"] == 0
    assert outcome["intact"] + outcome["unsafe"] + outcome["failed"] + outcome["no_answer"] == 20
    assert outcome["unsafe"] >= 1 and stats["unsafe_resumptions"] == outcome["unsafe"]


def test_a_fresh_stream_after_eviction_is_caught_by_the_id_parser():
    rng = random.Random(11)

    def plan(n: int) -> Cut | None:  # each call's POST (even connections), not its resumption
        return None if n < 2 or n % 2 else Cut(at=rng.randint(300, 600))

    app = server(store_size=2, countdown_delay=0.02, retry_ms=300, faults=["torn-replay-after-eviction"])
    outcome, _, _ = _through_proxy(app, plan, calls=10, parse_id=parse_reference_id)
    assert outcome["torn"] == 0 and outcome["unsafe"] >= 1, str(outcome)


@pytest.mark.parametrize("idempotent", [False, True])
def test_2026_07_28_never_resumes_and_reissues_only_what_is_idempotent(idempotent):
    async def main(url):
        async with Client(url, listen=False) as client:
            try:
                await client.call_tool("countdown", {"count": 3, "size": MIB}, idempotent=idempotent)
            except StreamBroken as broken:
                return str(broken)
            return "completed"

    def plan(n: int) -> Cut | None:
        return Cut(at=200) if n == 1 else None  # discover is 0; the call is cut

    with running(server(profile="2026-07-28")) as base, fault_proxy(urlsplit(base).port, plan) as proxy:
        said = asyncio.run(main(f"http://127.0.0.1:{proxy.port}/mcp"))
    assert ("re-issue this idempotent request" in said) is idempotent
    assert said != "completed"
