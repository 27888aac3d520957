"""The client against the official MCP SDK servers, started here on 127.0.0.1: the Python
SDK (``mcp``, ``sdk_servers.py``) and the TypeScript SDK through node (``ts_servers.py``),
in their four modes (stateful or stateless, SSE or JSON answers) and with an event store.

The client speaks 2025-11-25 here: the dual-stream session is what these tests exercise
(the Python SDK also speaks 2026-07-28, which ``test_client.py`` covers against the
reference server).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from ssewire.mcp.client import Client, RPCError, StreamBroken
from ssewire.mcp.streams.guard import UnsafeResumption
from ssewire.mcp.transport.serving import running
from tests.support.faultproxy import Cut, fault_proxy
from tests.support.mcp_helpers import until_listening
from tests.support.processes import free_port
from tests.support.resets import (
    answers_a_tool_call,
    calls_for,
    no_keepalive_httpx,
    random_cuts,
    ssewire_client,
    through_proxy,
)
from tests.support.sdk_servers import probe_app, text_of_size
from tests.support.ts_servers import ts_server

MODES = {
    "stateful-sse": {},
    "stateful-json": {"json_response": True},
    "stateless-sse": {"stateless": True},
    "stateless-json": {"stateless": True, "json_response": True},
}
SERVERS = ["python", "typescript"]
TS_FLAGS = {"stateless": "--stateless", "json_response": "--json", "store": "--store"}


@contextlib.contextmanager
def sdk_server(kind: str, *, port: int = 0, **mode: bool) -> Iterator[str]:
    """The official SDK server of ``kind`` in ``mode``; yields its MCP URL."""
    if kind == "python":
        with running(probe_app(**mode), port=port) as base:
            yield base + "/mcp"
        return
    with ts_server(*(TS_FLAGS[k] for k, on in mode.items() if on), port=port) as url:
        yield url


async def echo_sampling(params: dict) -> dict:
    question = params["messages"][0]["content"]["text"]
    return {"role": "assistant", "content": {"type": "text", "text": question.upper()}, "model": "echo"}


def session(url: str, **options) -> Client:
    return Client(url, profile="2025-11-25", **{"timeout": 20, "idle_timeout": 10, **options})


@pytest.mark.parametrize("kind", SERVERS)
@pytest.mark.parametrize("mode", MODES)
def test_two_concurrent_calls_are_routed_by_id_and_progress_token(kind, mode):
    async def main(url):
        first, second = [], []
        async with session(url) as client:
            results = await asyncio.gather(
                client.call_tool(
                    "countdown", {"count": 6, "size": 3000, "delay": 0.01}, on_progress=first.append
                ),
                client.call_tool(
                    "countdown", {"count": 4, "size": 70, "delay": 0.015}, on_progress=second.append
                ),
            )
            return client, first, second, results

    with sdk_server(kind, **MODES[mode]) as url:
        client, first, second, results = asyncio.run(main(url))
    assert [r["content"][0]["text"] for r in results] == [text_of_size(3000), text_of_size(70)]
    assert (client.session is None) == mode.startswith("stateless")
    ticks = [p["progress"] for p in first], [p["progress"] for p in second]
    if mode.endswith("sse"):
        assert ticks == ([1, 2, 3, 4, 5, 6], [1, 2, 3, 4])  # each call's own, in order, once
    else:
        assert ticks == ([], [])  # a JSON answer has no room for them: the SDKs drop them


@pytest.mark.parametrize("kind", SERVERS)
@pytest.mark.parametrize("mode", MODES)
def test_a_sampling_request_is_answered_or_fails_explicitly(kind, mode):
    """Where the SDK can send a request to the client (a stateful session answering in SSE)
    the handler's answer reaches the tool. Elsewhere the Python SDK refuses (a JSON-RPC
    error); the TypeScript SDK drops the request (JSON answers) or cannot match the
    answer POSTed back (stateless), so the tool never answers: the client's idle deadline
    reports it. Never a hang."""

    async def main(url):
        async with session(url, handlers={"sampling/createMessage": echo_sampling}, idle_timeout=2) as client:
            try:
                return await client.call_tool("ask", {"question": "why?"})
            except (RPCError, StreamBroken) as error:
                return error

    with sdk_server(kind, **MODES[mode]) as url:
        outcome = asyncio.run(main(url))
    if mode == "stateful-sse":
        assert outcome["content"][0]["text"] == "WHY?"
    elif kind == "python":
        assert isinstance(outcome, RPCError) and "back-channel" in str(outcome), outcome
    else:
        assert isinstance(outcome, StreamBroken), outcome


def test_a_sampling_request_on_the_get_stream_is_answered():
    """The Python SDK sends a request not related to a call on the standalone GET stream."""

    async def main(url):
        async with session(url, handlers={"sampling/createMessage": echo_sampling}) as client:
            await until_listening(client)  # the request goes to the open GET stream
            return await client.call_tool("ask", {"question": "where?", "related": False})

    with sdk_server("python") as url:
        result = asyncio.run(main(url))
    assert result["content"][0]["text"] == "WHERE?"


@pytest.mark.parametrize("kind", SERVERS)
def test_a_cut_inside_the_result_is_resumed_from_the_event_store(kind):
    """Each call's answer is cut inside its 1 MiB result (multi-byte characters throughout);
    the client resumes with Last-Event-ID and delivers the result whole, once."""
    size = 1 << 20
    offsets = iter([300_000, 700_000, 1_000_000, 123_457, 555_555])

    def plan(n: int, head: bytes) -> Cut | None:
        if head.startswith(b"POST") and answers_a_tool_call(head):
            return Cut(at=next(offsets, None))
        return None

    async def main(url):
        results, progress = [], []
        # one connection per request: the proxy's plan reads each request's head
        async with no_keepalive_httpx() as http, session(url, listen=False, http=http) as client:
            for _ in range(5):
                ticks = []
                results.append(
                    await client.call_tool(
                        "countdown", {"count": 3, "size": size, "delay": 0.01}, on_progress=ticks.append
                    )
                )
                progress.append([p["progress"] for p in ticks])
            return client.statistics(), results, progress

    with sdk_server(kind, store=True) as url, fault_proxy(urlsplit(url).port, plan) as proxy:
        stats, results, progress = asyncio.run(main(f"http://127.0.0.1:{proxy.port}/mcp"))
    assert proxy.stats.cuts == 5
    assert all(r["content"][0]["text"] == text_of_size(size) for r in results)
    assert progress == [[1, 2, 3]] * 5
    assert stats["resumptions"] == 5 and stats["torn_discarded"] == 5 and stats["duplicates_dropped"] == 0


@pytest.mark.parametrize("kind", SERVERS)
@pytest.mark.parametrize("json_response", [False, True])
def test_a_server_restart_is_a_404_and_the_session_is_reinitialized(kind, json_response):
    """The server restarts on the same port and forgets the session: the next call gets 404,
    the client opens a new session, says so, and the call is answered."""
    port = free_port()
    restarted, stopped = threading.Event(), threading.Event()

    async def main(url):
        async with session(url) as client:
            first = client.session
            await client.call_tool("countdown", {"count": 1, "size": 5})
            stopped.set()
            if not await asyncio.to_thread(restarted.wait, 30):
                raise TimeoutError("the server did not restart")
            result = await client.call_tool("countdown", {"count": 1, "size": 7})
            return first, client.session, client.statistics(), result

    def serve(ready: threading.Event) -> None:
        with sdk_server(kind, port=port, json_response=json_response):
            ready.set()
            stopped.wait(30)
        with sdk_server(kind, port=port, json_response=json_response):
            restarted.set()
            done.wait(30)

    up, done = threading.Event(), threading.Event()
    server_thread = threading.Thread(target=serve, args=(up,), daemon=True)
    server_thread.start()
    try:
        assert up.wait(30)
        first, second, stats, result = asyncio.run(main(f"http://127.0.0.1:{port}/mcp"))
    finally:
        stopped.set()
        done.set()
        server_thread.join(30)
    assert first and second and first != second
    assert stats["reinitializations"] == 1
    assert result["content"][0]["text"] == text_of_size(7)


@pytest.mark.parametrize("kind", SERVERS)
def test_random_cuts_against_the_sdk_server_never_tear_duplicate_or_hang(kind):
    """The resets of test_resets.py, against the official SDK server with an event store:
    1 MiB results of multi-byte text, their answers and resumptions cut at random offsets,
    the GET stream open. Every call is delivered whole and once, or fails explicitly."""
    size = 1 << 20
    expected = hashlib.sha256(text_of_size(size).encode()).hexdigest()
    caller = ssewire_client(
        arguments={"count": 3, "size": size, "delay": 0.005},
        expected=expected,
        listen=True,
    )
    resets = int(os.environ.get("SSEWIRE_SDK_RESETS", "60"))
    calls = calls_for(resets)
    plan = random_cuts(resets, seed=31, high=int(size * 1.6))  # the text's UTF-8 is 1.4 times as long
    tally, proxied = through_proxy(caller, plan, calls, serve=sdk_server(kind, store=True))
    bad = {k: tally.counts()[k] for k in ("torn", "duplicated", "lost", "unsafe", "failed", "hung")}
    assert bad == dict.fromkeys(bad, 0), (tally.counts(), tally.reasons)
    assert tally.intact == calls - tally.no_answer and tally.no_answer <= 1
    assert proxied.cuts >= resets // 2


def test_a_store_that_cannot_replay_is_named_after_one_retry():
    """The SDK answers a resumption its store cannot serve with 200 and an empty stream:
    the client retries once, then says the server cannot resume the stream (not a budget
    spent 0.1 s at a time, not a hang, not 'reopen it with GET')."""
    size = 200_000
    cut: list[int] = []

    def plan(n: int, head: bytes) -> Cut | None:
        if head.startswith(b"POST ") and answers_a_tool_call(head) and not cut:
            cut.append(n)
            return Cut(at=size // 2)  # inside the result, after its progress
        return None

    async def main(url: str) -> tuple[UnsafeResumption, dict, float]:
        loop = asyncio.get_running_loop()
        async with (
            no_keepalive_httpx() as http,
            Client(url, profile="2025-11-25", listen=False, http=http) as client,
        ):
            start = loop.time()
            with pytest.raises(UnsafeResumption) as raised:
                await client.call_tool("countdown", {"count": 2, "size": size, "delay": 0.001})
            return raised.value, client.statistics(), loop.time() - start

    with (
        sdk_server("python", store=True, replays=False) as url,
        fault_proxy(urlsplit(url).port, plan) as proxy,
    ):
        error, stats, took = asyncio.run(main(f"http://127.0.0.1:{proxy.port}/mcp"))
    assert error.kind == "cannot-resume" and "the server cannot resume" in str(error)
    assert "check its effects before sending it again" in str(error)  # what the caller can do
    assert stats["resumptions"] == 2 and stats["unsafe_resumptions"] == 1  # one retry, no more
    assert took < 10
