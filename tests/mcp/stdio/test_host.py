"""One stdio server shared by a route's sessions (`StdioHost` behind `StdioTransport`), driven
by the package's `Client` and by raw HTTP requests to the transport, against two real
processes: the official Python SDK's stdio server and a scripted one that reports what
reached it (so the ids, tokens and cancellations are asserted where they land)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from ssewire.mcp.client import Client, RPCError, StreamBroken
from ssewire.mcp.stdio import StdioHost, StdioTransport
from ssewire.mcp.stdio.host import StdioUnavailable
from ssewire.mcp.stdio.process import Child
from tests.support.mcp_helpers import INITIALIZE

ROOT = str(Path(__file__).resolve().parents[3])
SDK = [sys.executable, "-m", "tests.support.stdio_server"]
SCRIPTED = [sys.executable, "-m", "tests.support.stdio_scripted"]
URL = "http://stdio.invalid/mcp"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 60))


@asynccontextmanager
async def served(
    command: list[str], *, keepalive: float = 10.0, **options: Any
) -> AsyncIterator[tuple[StdioHost, httpx.AsyncClient]]:
    host = StdioHost(
        command, cwd=ROOT, env=["PYTHONPATH"], environ={**os.environ, "PYTHONPATH": ROOT}, **options
    )
    http = httpx.AsyncClient(
        transport=StdioTransport(host, keepalive=keepalive), timeout=httpx.Timeout(30, read=None)
    )
    try:
        yield host, http
    finally:
        await http.aclose()


def client(http: httpx.AsyncClient, **options: Any) -> Client:
    return Client(URL, http=http, profile="2025-11-25", **options)


def text(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


async def seen(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    async with client(http, listen=False) as other:
        return json.loads(text(await other.call_tool("seen")))


async def until(condition: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "not within the deadline"
        await asyncio.sleep(0.02)


# -- many sessions, one process ------------------------------------------------------------


def test_sessions_asking_with_the_same_ids_get_their_own_answers_and_progress():
    async def scenario() -> None:
        async with (
            served(SCRIPTED) as (host, http),
            client(http, listen=False) as a,
            client(http, listen=False) as b,
        ):
            ticks: dict[str, list[Any]] = {"a": [], "b": []}
            first, second = await asyncio.gather(
                a.call_tool("progress", {"count": 3}, on_progress=lambda p: ticks["a"].append(p["progress"])),
                b.call_tool("progress", {"count": 2}, on_progress=lambda p: ticks["b"].append(p["progress"])),
            )
            assert text(first) == text(second) == "done"
            assert ticks == {"a": [1, 2, 3], "b": [1, 2]}
            calls = [
                m
                for m in await seen(http)
                if m["method"] == "tools/call" and m["params"]["name"] == "progress"
            ]
            child_ids = [m["id"] for m in calls]
            tokens = [m["params"]["_meta"]["progressToken"] for m in calls]
            assert len(set(child_ids)) == 2 and tokens == child_ids  # the host's own, one per call
            assert host.figures["starts"] == 1  # one process for every session

    run(scenario())


def test_the_process_is_initialized_once_declaring_no_client_capability_and_its_requests_are_refused():
    async def scenario() -> None:
        async with served(SCRIPTED) as (_host, http):
            async with client(http, listen=False) as a:
                assert a.server_info["serverInfo"]["name"] == "scripted"
                refusal = json.loads(text(await a.call_tool("ask")))
            messages = await seen(http)
            initializes = [m for m in messages if m["method"] == "initialize"]
            assert len(initializes) == 1 and initializes[0]["params"]["capabilities"] == {}
            assert [m["method"] for m in messages].count("notifications/initialized") == 1
            assert refusal["code"] == -32601 and "cannot ask its clients" in refusal["message"]

    run(scenario())


def test_list_changes_reach_every_listener_updates_only_the_subscribed_and_logs_no_one():
    async def scenario() -> None:
        heard: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        async with (
            served(SCRIPTED) as (host, http),
            client(http, on_notification=heard["a"].append) as a,
            client(http, on_notification=heard["b"].append) as b,
        ):
            await until(lambda: all(s.listen is not None for s in host.sessions.values()))
            await b.request("resources/subscribe", {"uri": "file:///watched"})
            await a.request("resources/subscribe", {"uri": "file:///other"})
            assert text(await b.call_tool("announce", {"uri": "file:///watched"})) == "announced"
            await until(lambda: len(heard["b"]) == 2 and len(heard["a"]) == 1)
            await asyncio.sleep(0.1)  # nothing more comes
            assert [n["method"] for n in heard["a"]] == ["notifications/tools/list_changed"]
            assert [n["method"] for n in heard["b"]] == [
                "notifications/tools/list_changed",
                "notifications/resources/updated",
            ]
            assert host.figures["dropped"] == 1  # the log message: it names no session

    run(scenario())


def test_a_resource_is_subscribed_in_the_process_once_and_let_go_with_its_last_subscriber():
    async def scenario() -> None:
        async with served(SCRIPTED) as (_host, http):
            async with client(http, listen=False) as a, client(http, listen=False) as b:
                for session in (a, b):
                    await session.request("resources/subscribe", {"uri": "file:///x"})
                await a.request("resources/unsubscribe", {"uri": "file:///x"})
                methods = [m["method"] for m in await seen(http)]
                assert methods.count("resources/subscribe") == 1 and "resources/unsubscribe" not in methods
            methods = [m["method"] for m in await seen(http)]  # b's session ended: the last one
            assert methods.count("resources/unsubscribe") == 1

    run(scenario())


# -- raw HTTP: cancellation, the session's end, the transport's answers -------------------


async def opened(http: httpx.AsyncClient) -> dict[str, str]:
    body = INITIALIZE
    answer = await http.post(URL, json=body, headers=HEADERS)
    assert answer.status_code == 200, answer.text
    return {**HEADERS, "mcp-session-id": answer.headers["mcp-session-id"]}


def hang(ident: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": "hang", "arguments": {}},
    }


def test_a_cancellation_reaches_the_process_under_the_id_it_was_sent_with():
    async def scenario() -> None:
        async with served(SCRIPTED) as (_host, http):
            headers = await opened(http)
            async with http.stream("POST", URL, json=hang("mine"), headers=headers) as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": "mine", "reason": "no"},
                }
                assert (await http.post(URL, json=cancel, headers=headers)).status_code == 202
                messages = await seen(http)
            sent = next(m for m in messages if m["method"] == "tools/call" and m["params"]["name"] == "hang")
            cancelled = [m for m in messages if m["method"] == "notifications/cancelled"]
            assert isinstance(sent["id"], int)
            assert cancelled == [
                {
                    "method": "notifications/cancelled",
                    "id": None,
                    "params": {"requestId": sent["id"], "reason": "no"},
                }
            ]

    run(scenario())


def test_a_cancellation_after_the_calls_stream_closed_still_reaches_the_process():
    """The gateway's relay closes a call's stream, then sends the cancellation: it must not
    be lost with the stream (the process would work on, for no one)."""

    async def scenario() -> None:
        async with served(SCRIPTED) as (_host, http):
            headers = await opened(http)
            async with http.stream("POST", URL, json=hang("late"), headers=headers):
                pass
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "late"}}
            assert (await http.post(URL, json=cancel, headers=headers)).status_code == 202
            messages = await seen(http)
            sent = next(m for m in messages if m["method"] == "tools/call" and m["params"]["name"] == "hang")
            cancelled = [m["params"] for m in messages if m["method"] == "notifications/cancelled"]
            assert cancelled == [{"requestId": sent["id"]}]

    run(scenario())


def test_tasks_are_neither_offered_nor_passed_to_the_shared_process():
    """A task outlives its call and is fetched by id: in a process every session shares, one
    session could read another's. The capability is hidden, tasks/* refused, and a call
    asked as a task runs as a plain call."""

    async def scenario() -> None:
        async with served(SCRIPTED) as (_host, http):
            answer = await http.post(URL, json=INITIALIZE, headers=HEADERS)
            assert answer.json()["result"]["capabilities"] == {
                "tools": {"listChanged": True},
                "resources": {"subscribe": True},
            }
            headers = {**HEADERS, "mcp-session-id": answer.headers["mcp-session-id"]}
            for method in ("tasks/list", "tasks/get", "tasks/result", "tasks/cancel"):
                body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": {"taskId": "t-1"}}
                refused = (await http.post(URL, json=body, headers=headers)).json()
                assert (
                    refused["error"]["code"] == -32601
                    and "tasks are not offered" in refused["error"]["message"]
                )
            call = {
                "jsonrpc": "2.0",
                "id": 10,
                "method": "tools/call",
                "params": {"name": "progress", "arguments": {"count": 1}, "task": {"ttl": 60000}},
            }
            async with http.stream("POST", URL, json=call, headers=headers) as stream:
                body = (await stream.aread()).decode()
            assert '"text":"done"' in body
            messages = await seen(http)
            assert not [m for m in messages if m["method"].startswith("tasks/")]
            sent = next(
                m for m in messages if m["method"] == "tools/call" and m["params"]["name"] == "progress"
            )
            assert "task" not in sent["params"]

    run(scenario())


def test_a_process_that_asks_faster_than_it_reads_is_never_deadlocked_by_its_answers():
    """Pings answered by the reader of stdout are written without waiting on stdin: a process
    writing pings while not reading (its stdin pipe full) still gets to answer."""

    async def scenario() -> None:
        async with served(SCRIPTED) as (host, http), client(http, listen=False) as a:
            assert text(await a.call_tool("flood", {"count": 50000})) == "flooded"
            # 50,000 answers are over what an unread stdin may hold: the rest are counted
            assert host.figures["unanswered"] > 0
            assert text(await a.call_tool("progress", {"count": 1})) == "done"

    run(scenario())


SLOW_START = [  # the scripted server, a second late (a first `npx`, a container)
    sys.executable,
    "-c",
    "import runpy, time; time.sleep(1); runpy.run_module('tests.support.stdio_scripted', run_name='__main__')",
]


def test_a_session_that_leaves_during_the_start_never_ends_it_for_the_others():
    async def scenario() -> None:
        async with served(SLOW_START) as (host, _http):
            first = asyncio.ensure_future(host.ready())
            await until(lambda: host.child is not None)
            pid = host.child.pid
            second = asyncio.ensure_future(host.ready())
            first.cancel()  # its client went away: the start goes on for the second
            with pytest.raises(asyncio.CancelledError):
                await first
            first.cancel()  # (and again, as a cancel scope would: still nothing)
            server = await second
            assert server["serverInfo"]["name"] == "scripted" and host.child.pid == pid
            assert host.figures == {**host.figures, "starts": 1, "exits": 0}

    run(scenario())


def test_a_gateway_stopping_during_the_start_leaves_no_process_behind():
    async def scenario() -> int:
        silent = [sys.executable, "-c", "import time; time.sleep(60)"]  # never answers initialize
        host = StdioHost(silent, start_timeout=30)
        starting = asyncio.ensure_future(host.ready())
        await until(lambda: host.child is not None)
        pid = host.child.pid
        await host.aclose()
        with pytest.raises((asyncio.CancelledError, StdioUnavailable)):
            await starting
        assert host.child is None and host.server is None
        with pytest.raises(StdioUnavailable, match="stopping"):
            await host.ready()
        return pid

    pid = run(scenario())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_ending_a_session_cancels_its_calls_in_the_process_and_forgets_it():
    async def scenario() -> None:
        async with served(SCRIPTED) as (_host, http):
            headers = await opened(http)
            async with http.stream("POST", URL, json=hang(5), headers=headers):
                assert (await http.delete(URL, headers=headers)).status_code == 200
                messages = await seen(http)
            sent = next(m for m in messages if m["method"] == "tools/call" and m["params"]["name"] == "hang")
            assert {
                "method": "notifications/cancelled",
                "id": None,
                "params": {"requestId": sent["id"], "reason": "the session ended"},
            } in messages
            again = await http.post(URL, json=hang(6), headers=headers)
            assert again.status_code == 404 and again.json()["error"]["code"] == -32001

    run(scenario())


def test_the_transport_answers_what_a_streamable_http_server_would():
    async def scenario() -> None:
        async with served(SCRIPTED) as (host, http):
            assert host.child is None  # nothing started before a request
            probe = await http.get(URL, headers={"accept": "application/json"})
            assert probe.status_code == 405 and host.child is not None  # readiness: it runs
            no_session = await http.post(URL, json=hang(1), headers=HEADERS)
            assert (
                no_session.status_code == 400 and "initialize first" in no_session.json()["error"]["message"]
            )
            unknown = await http.post(URL, json=hang(1), headers={**HEADERS, "mcp-session-id": "nope"})
            assert unknown.status_code == 404
            not_json = await http.post(URL, content=b"{", headers=(await opened(http)))
            assert not_json.status_code == 400 and not_json.json()["error"]["code"] == -32700
            headers = await opened(http)
            level = await http.post(
                URL,
                json={"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "debug"}},
                headers=headers,
            )
            assert level.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}  # the host's: not the process's
            async with http.stream(
                "GET", URL, headers={**headers, "accept": "text/event-stream"}
            ) as listening:
                assert listening.status_code == 200
                second = await http.get(URL, headers={**headers, "accept": "text/event-stream"})
                assert second.status_code == 409
            assert "logging/setLevel" not in [m["method"] for m in await seen(http)]

    run(scenario())


def test_a_program_that_cannot_start_is_a_503_with_retry_after_and_an_explicit_client_error(tmp_path):
    async def scenario() -> None:
        async with served([str(tmp_path / "no-such-program")]) as (_host, http):
            answer = await http.post(
                URL, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, headers=HEADERS
            )
            assert answer.status_code == 503 and int(answer.headers["retry-after"]) >= 1
            assert "could not start (No such file or directory)" in answer.text
            assert str(tmp_path) not in answer.text  # the command is the operator's: never echoed
            with pytest.raises(Exception) as failed:
                async with client(http, listen=False):
                    pass
            assert "503" in str(failed.value) or "could not start" in str(failed.value)

    run(scenario())


def test_a_request_is_not_held_for_the_backoff_of_a_program_that_keeps_exiting(caplog):
    """It exits at once: the first starts are tried (the first backoff, half a second, is
    waited); once the backoff is longer, a request is answered at once, 503 with when to
    come back, and no start is tried before then."""
    exits = [sys.executable, "-c", "import sys; sys.exit(7)"]

    async def scenario() -> tuple[list[tuple[int, float, float]], StdioHost]:
        answers = []
        async with served(exits) as (host, http):
            for ident in range(4):
                began = time.monotonic()
                answer = await http.post(URL, json={**INITIALIZE, "id": ident}, headers=HEADERS)
                waited = time.monotonic() - began
                answers.append((answer.status_code, float(answer.headers["retry-after"]), waited))
            return answers, host

    answers, host = run(scenario())
    gc.collect()  # a failure no one retrieved is said when its future is collected
    assert "never retrieved" not in caplog.text
    assert [status for status, _, _ in answers] == [503] * 4
    assert host.figures["starts"] == 2  # the third and fourth came within the backoff
    for _, retry_after, waited in answers[2:]:
        assert retry_after >= 1 and waited < 0.4  # told when, not held until then
    assert "stdio server ended (exit status 7); next start in" in caplog.text


def test_a_program_that_stops_reading_before_it_exits_leaves_no_failure_unretrieved(caplog, monkeypatch):
    """Its stdin closed before the host's initialize is written (the write is held until
    then): the write fails, then the exit fails the initialize's waiter too, which no one
    awaits any more."""
    deaf = [sys.executable, "-c", "import os, time; os.close(0); time.sleep(0.5); raise SystemExit(7)"]
    send = Child.send

    async def late(child: Child, line: bytes) -> None:
        await asyncio.sleep(0.3)
        await send(child, line)

    monkeypatch.setattr(Child, "send", late)

    async def scenario() -> int:
        async with served(deaf) as (_host, http):
            answer = await http.post(URL, json=INITIALIZE, headers=HEADERS)
            await asyncio.sleep(0.5)  # (the exit comes after the failed write)
            return answer.status_code

    assert run(scenario()) == 503
    gc.collect()
    assert "never retrieved" not in caplog.text


def test_a_missing_program_is_logged_and_backed_off_as_a_program_that_exits(tmp_path, caplog):
    async def scenario() -> list[float]:
        waits = []
        async with served([str(tmp_path / "no-such-program")]) as (_host, http):
            for ident in range(3):
                answer = await http.post(URL, json={**INITIALIZE, "id": ident}, headers=HEADERS)
                assert answer.status_code == 503
                waits.append(float(answer.headers["retry-after"]))
        return waits

    waits = run(scenario())
    assert "stdio server could not start (No such file or directory); next start in" in caplog.text
    assert caplog.text.count("could not start") == 2  # the third came within the second's backoff
    assert waits[-1] >= 1


@pytest.mark.parametrize("last", [False, True], ids=["id-first", "id-last"])
def test_an_answer_that_does_not_parse_ends_its_call_at_once(last):
    async def scenario() -> None:
        async with served(SCRIPTED) as (host, http), client(http, listen=False, timeout=30) as a:
            began = time.monotonic()
            with pytest.raises(RPCError) as unreadable:
                await a.call_tool("unreadable", {"last": last})
            assert time.monotonic() - began < 5  # not at the call's deadline
            assert unreadable.value.error["data"] == {"gateway": "upstream"}
            assert "not a JSON-RPC message" in str(unreadable.value)
            assert text(await a.call_tool("garbage")) == "after garbage"  # the session goes on
            assert host.figures["invalid"] == 2

    run(scenario())


def test_a_request_of_the_servers_that_does_not_parse_ends_no_call_of_the_same_id():
    async def scenario() -> None:
        async with served(SCRIPTED) as (host, http), client(http, listen=False, timeout=30) as a:
            assert text(await a.call_tool("unreadable_ask")) == "answered after"
            assert host.figures["invalid"] == 1

    run(scenario())


# -- the official SDK's stdio server: exits, restarts, bounds, keep-alives ------------------


def test_a_process_that_dies_mid_call_ends_that_call_explicitly_and_is_started_again():
    async def scenario() -> None:
        async with (
            served(SDK) as (host, http),
            client(http, listen=False) as a,
            client(http, listen=False) as b,
        ):
            before = text(await a.call_tool("whoami"))
            with pytest.raises(RPCError) as died:
                await a.call_tool("crash")
            assert "ended (exit status 3) before answering" in str(died.value)
            assert "may have been processed" in str(died.value)
            assert died.value.error["data"] == {"gateway": "upstream"}
            after = text(await b.call_tool("whoami"))  # the other session goes on, on a new process
            assert after != before and host.figures == {**host.figures, "starts": 2, "exits": 1}
            assert text(await a.call_tool("echo", {"text": "still here"})) == "still here"

    run(scenario())


def test_an_answer_over_the_message_limit_ends_its_call_and_nothing_else():
    async def scenario() -> None:
        async with served(SDK, max_message_size=100_000) as (host, http), client(http, listen=False) as a:
            with pytest.raises(RPCError) as large:
                await a.call_tool("big", {"size": 300_000})
            assert "over the 100000 byte message limit" in str(large.value)
            assert large.value.error["data"] == {"gateway": "too-large"}
            assert text(await a.call_tool("big", {"size": 10})) == "x" * 10
            assert host.figures["oversize"] == 1 and host.figures["starts"] == 1

    run(scenario())


@pytest.mark.parametrize("keepalive", [0.1, 10.0])
def test_keep_alive_comments_keep_a_silent_call_from_looking_idle(keepalive):
    async def scenario() -> None:
        async with served(SDK, keepalive=keepalive) as (host, http):
            await host.ready()  # started first: a loaded machine may take longer than the idle bound
            async with client(http, listen=False, idle_timeout=0.6, max_resumptions=0) as a:
                call = a.call_tool("countdown", {"count": 1, "delay": 1.5})
                if keepalive < 0.6:
                    assert text(await call) == "done"
                else:
                    with pytest.raises(StreamBroken, match=r"idle: no event and no keep-alive for 0\.6 s"):
                        await call

    run(scenario())


def test_closing_the_transport_stops_the_process():
    async def scenario() -> int:
        async with served(SDK) as (_host, http), client(http, listen=False) as a:
            return int(text(await a.call_tool("whoami")))

    pid = run(scenario())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_past_its_sessions_the_host_lets_the_idlest_go_and_refuses_when_all_are_busy():
    """A gateway's replicas never end the upstream sessions they hand each other: the host
    makes room itself, never at the cost of a session with a call in flight."""

    async def scenario() -> None:
        async with served(SCRIPTED, max_sessions=2) as (host, http):
            first, second = await opened(http), await opened(http)
            async with http.stream("POST", URL, json=hang(1), headers=second):
                third = await opened(http)  # room made: the first, idle, goes
                gone = await http.post(URL, json=hang(2), headers=first)
                assert gone.status_code == 404
                async with http.stream("POST", URL, json=hang(3), headers=third):
                    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
                    full = await http.post(URL, json=body, headers=HEADERS)
                    assert full.status_code == 503 and "too many sessions" in full.text
            assert len(host.sessions) == 2

    run(scenario())
