"""The client session against the reference server: routing, progress, server-to-client
requests, re-initialization, keep-alives, the 2026-07-28 mode. (Resets through the fault
proxy: ``test_resets.py``.)"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import httpx
import pytest

from ssewire.mcp.client import Client, MessageTooLarge, StreamBroken
from ssewire.mcp.reference.tools import filler
from ssewire.mcp.transport.serving import running
from tests.support.faultproxy import Cut, fault_proxy
from tests.support.mcp_helpers import until_listening
from tests.support.resets import MIB, answers_a_tool_call, no_keepalive_httpx
from tests.support.resets import reference_server as server


def text_of(result: dict) -> str:
    return result["content"][0]["text"]


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
    assert text_of(result) == filler(2 * MIB)
    stats = client.statistics()
    assert stats["resets"] == 0 and stats["ttfb_s"] and len(stats["progress_gaps_s"]) == 9


def test_a_long_calls_progress_times_stay_bounded_while_it_runs():
    """A call may stream millions of notifications: it keeps the times of its newest
    ``FIGURES_KEPT + 1`` only (their gaps are all the statistics keep)."""
    from ssewire.mcp.client.counters import FIGURES_KEPT

    count = 2 * FIGURES_KEPT + 10

    async def main(url):
        held = []
        async with Client(url) as client:

            def on_progress(params):
                (record,) = set(client._requests.values())  # one call: under its id and its token
                held.append(len(record.times))

            await client.call_tool("countdown", {"count": count, "size": 10}, on_progress=on_progress)
            return held, client.statistics()

    app = server(countdown_delay=0)
    with running(app) as base:
        held, stats = asyncio.run(main(base + "/mcp"))
    assert len(held) == count and max(held) == FIGURES_KEPT + 1
    assert len(stats["progress_gaps_s"]) == FIGURES_KEPT


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


def test_a_failing_handler_is_answered_without_its_text(caplog):
    """The handler's exception may carry anything of the caller's (a token, a path): the
    server gets a plain JSON-RPC error; the text goes to the client's log only."""

    def sample(params):
        raise ValueError("token=abc123-not-for-the-server")

    async def main(url):
        async with Client(url, handlers={"sampling/createMessage": sample}) as client:
            return await client.call_tool("ask", {"question": "why?"})

    with running(server()) as base:
        result = asyncio.run(main(base + "/mcp"))
    said = text_of(result)  # the reference server answers with what the client replied
    assert "the client's handler for sampling/createMessage failed" in said
    assert "abc123" not in said
    assert "abc123" in caplog.text  # logged where the caller can read it


def test_a_failing_callback_is_counted_and_the_call_goes_on(caplog):
    def progress(params):
        raise RuntimeError("the caller's bug")

    async def main(url):
        async with Client(url, listen=False) as client:
            result = await client.call_tool("countdown", {"count": 3, "size": 10}, on_progress=progress)
            return result, client.statistics()

    with running(server()) as base:
        result, stats = asyncio.run(main(base + "/mcp"))
    assert len(text_of(result)) == 10 and stats["callback_errors"] == 3
    assert "the caller's bug" in caplog.text


def test_what_broke_the_get_stream_is_kept_and_logged(caplog):
    async def main(url):
        async with Client(url, idle_timeout=0.3) as client:
            await until_listening(client)
            for _ in range(40):  # bounded: 2 s
                if client.listen_error is not None:
                    break
                await asyncio.sleep(0.05)
            return client.listen_error, client.statistics()

    with running(server(faults=["no-keepalives"])) as base:
        error, stats = asyncio.run(main(base + "/mcp"))
    assert error is not None and "idle" in str(error) and stats["idle_timeouts"] >= 1
    assert "the GET stream failed" in caplog.text


def test_a_get_stream_the_server_keeps_ending_is_reopened_and_the_books_stay_small():
    """The server ends its idle GET stream every 0.4 s (the idle-close fault): the client
    resumes it once, then, the resumption bringing nothing new, opens a fresh one; it
    never polls the same chain for ever, and the ledger keeps a stream or two."""

    async def main(url):
        async with Client(url, idle_timeout=5.0) as client:
            await until_listening(client)
            await asyncio.sleep(2.0)  # about five ends
            reopened = False
            for _ in range(40):  # bounded: 2 s
                if client.listening:
                    reopened = True
                    break
                await asyncio.sleep(0.05)
            return reopened, client.guard.ledger.size, client.statistics()

    with running(server(keepalive=0.2, faults=["idle-close"])) as base:
        reopened, books, stats = asyncio.run(main(base + "/mcp"))
    assert reopened and books <= 2, (books, stats)
    assert stats["resumptions"] <= 8  # one per end at most, not one a retry interval


def test_a_resumption_cut_before_its_answer_is_resumed_again():
    """The call's answer is cut inside its result, then its first resumption before any
    byte of its answer: the client resumes once more, from the same cursor, and completes."""
    cuts: list[bytes] = []

    def plan(n: int, head: bytes) -> Cut | None:
        if not answers_a_tool_call(head) or len(cuts) >= 2:
            return None
        cuts.append(head[:4])
        return Cut(at=2000 if head.startswith(b"POST") else 0)

    async def main(url):
        async with (
            no_keepalive_httpx() as http,
            Client(url, profile="2025-11-25", listen=False, http=http) as client,
        ):
            result = await client.call_tool("countdown", {"count": 2, "size": 100_000})
            return result, client.statistics()

    with running(server()) as base, fault_proxy(urlsplit(base).port, plan) as proxy:
        result, stats = asyncio.run(main(f"http://127.0.0.1:{proxy.port}/mcp"))
    assert cuts == [b"POST", b"GET "]
    assert len(text_of(result)) == 100_000 and stats["resumptions"] == 2


def test_sequential_calls_reuse_one_connection():
    """Each answer is read to its end after its response, so its connection goes back to
    the pool: a session of sequential calls is one TCP connection, not one per call."""

    async def main(url):
        seen = []
        async with Client(url, profile="2025-11-25", listen=False) as client:
            for _ in range(5):
                await client.call_tool("countdown", {"count": 3, "size": 100_000}, on_progress=seen.append)
            return len(seen), client.statistics()

    with running(server()) as base, fault_proxy(urlsplit(base).port, lambda n, head: None) as proxy:
        notes, stats = asyncio.run(main(f"http://127.0.0.1:{proxy.port}/mcp"))
    assert notes == 15 and stats["drained"] >= 5
    assert proxy.stats.connections == 1  # initialize, initialized, five calls and the DELETE


def test_an_answer_held_open_after_its_response_is_let_go_after_the_grace():
    """A server that keeps the stream open after the response: the call returns its result
    within the short grace, and the connection (never ending) is closed, not reused."""
    from ssewire.mcp.client.engine import GRACE
    from tests.support.hostile_servers import hostile_server

    async def main(url):
        async with Client(url, profile="2025-11-25", listen=False) as client:
            started = time.monotonic()
            result = await client.call_tool("anything")
            return result, time.monotonic() - started, client.statistics()

    with hostile_server("held-open") as (url, _):
        result, took, stats = asyncio.run(main(url))
    assert result == {"content": []}
    assert GRACE <= took < GRACE + 0.9  # the grace, and not the keep-alive's second
    assert stats["drained"] == 0


def test_late_progress_of_an_ended_call_is_dropped_and_counted():
    """Progress for a call that ended (a server's straggler, or a copy on another stream
    once the call's books are gone) is never handed to on_notification as if it were news."""
    others, tokens = [], []

    async def main(url):
        async with Client(url, profile="2025-11-25", listen=False, on_notification=others.append) as client:
            await client.call_tool(
                "countdown", {"count": 2, "size": 10}, on_progress=lambda p: tokens.append(p["progressToken"])
            )
            late = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": tokens[0], "progress": 9},
            }
            client._route(late)  # as if it came now, on any stream
            return client.statistics()

    with running(server()) as base:
        stats = asyncio.run(main(base + "/mcp"))
    assert tokens and stats["late_progress"] == 1 and others == []


def test_an_expired_session_is_reinitialized_and_said_so():
    async def main(url, app):
        async with Client(url) as client:
            first = client.session
            await client.call_tool("echo", {"text": "a"})
            app.sessions.pop(first)  # the server forgot the session: the next request gets 404
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
            await until_listening(client)
            await asyncio.sleep(0.7)
            return client.statistics()

    with running(server()) as base:
        stats = asyncio.run(main(base + "/mcp"))
    assert stats["keepalives"] >= 2 and stats["idle_timeouts"] == 0
    assert 0.7 <= stats["get_uptime_s"] < 10  # the GET stream open now counts


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


@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
@pytest.mark.parametrize("idempotent", [False, True])
def test_2026_07_28_never_resumes_and_reissues_only_what_is_idempotent(idempotent, json_response):
    async def main(url):
        # one connection per request: the proxy's plan reads each connection's first request
        async with no_keepalive_httpx() as http, Client(url, listen=False, http=http) as client:
            try:
                result = await client.call_tool("countdown", {"count": 3, "size": MIB}, idempotent=idempotent)
            except StreamBroken as broken:
                return str(broken), client.statistics()
            return len(text_of(result)), client.statistics()

    cut: list[int] = []

    def plan(n: int, head: bytes) -> Cut | None:
        if answers_a_tool_call(head) and not cut:  # the call's first answer is cut, inside its body
            cut.append(n)
            return Cut(at=200)
        return None

    with (
        running(server(profile="2026-07-28", json_response=json_response)) as base,
        fault_proxy(urlsplit(base).port, plan) as proxy,
    ):
        said, stats = asyncio.run(main(f"http://127.0.0.1:{proxy.port}/mcp"))
    assert stats["resets"] == 1 and stats["resumptions"] == 0
    if idempotent:
        assert said == MIB and stats["reissues"] == 1  # sent again with a new id, and answered
    else:
        assert stats["reissues"] == 0
        assert "may have been processed, so it is not sent again" in said
        assert "idempotent=True" in said  # what the caller can do


def test_the_same_progress_on_two_streams_reaches_the_caller_once():
    """The server's broadcast-two-streams fault sends each progress notification on the
    call's stream and on the GET stream: the guard drops the copy, whichever came first
    (or the client, as late progress, when it comes after the answer)."""

    async def main(url):
        seen = []
        async with Client(url, profile="2025-11-25") as client:
            await until_listening(client)  # the server sends its copies to open GET streams
            await client.call_tool(
                "countdown", {"count": 6, "size": 10, "delay": 0.02}, on_progress=seen.append
            )
            for _ in range(100):  # the last copy may come on the GET stream after the answer
                stats = client.statistics()
                if stats["duplicates_dropped"] + stats["late_progress"] >= 6:
                    break
                await asyncio.sleep(0.02)
            return seen, client.statistics()

    with running(server(faults=["broadcast-two-streams"])) as base:
        seen, stats = asyncio.run(main(base + "/mcp"))
    assert [p["progress"] for p in seen] == [1, 2, 3, 4, 5, 6]
    # a copy that comes after the answer is late progress (its call's books are gone), dropped too
    assert stats["duplicates_dropped"] + stats["late_progress"] == 6 and stats["unsafe_resumptions"] == 0


@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
def test_an_answer_over_the_message_limit_ends_the_call_and_names_the_limit(json_response):
    async def main(url):
        async with Client(url, max_message_size=4096) as client:
            small = await client.call_tool("countdown", {"count": 1, "size": 100})
            with pytest.raises(MessageTooLarge, match="over the 4096 byte message limit") as raised:
                await client.call_tool("countdown", {"count": 1, "size": 50_000})
            after = await client.call_tool("countdown", {"count": 1, "size": 200})  # the session lives on
            return small, raised.value, after, client.statistics()

    with running(server(json_response=json_response)) as base:
        small, error, after, stats = asyncio.run(main(base + "/mcp"))
    assert len(text_of(small)) == 100 and len(text_of(after)) == 200
    assert error.limit == 4096 and error.size > 4096
    assert stats["resumptions"] == 0  # an SSE answer over the limit is not resumed into again


def test_a_cut_initialize_answer_is_resumed_with_the_session_headers():
    """The handshake's own SSE answer, cut after its priming event: the resumption GET
    carries the session id and the version asked for, though none is agreed yet."""

    def plan(_, head):
        return Cut(at=300) if b'"initialize"' in head else None

    async def main(url):
        async with Client(url, profile="2025-11-25", listen=False, timeout=10, idle_timeout=3) as client:
            return client.version, client.session, client.statistics()["resumptions"]

    with running(server()) as base, fault_proxy(urlsplit(base).port, plan) as proxy:
        version, session, resumptions = asyncio.run(main(f"http://127.0.0.1:{proxy.port}/mcp"))
    assert version == "2025-11-25" and session is not None and resumptions == 1


def test_another_client_takes_up_an_unanswered_call_from_its_position():
    """What a gateway replica does for one that stopped: attach to the session, resume the
    call's answer from the position the first client reached, get the rest and the result."""
    import asyncio as _asyncio

    from ssewire.mcp.transport.serving import running as _running
    from tests.support.resets import reference_server as _reference

    async def scenario(url):
        first = Client(url, profile="2025-11-25", listen=False, first_id=1000)
        await first.connect()
        seen, sent = [], []
        call = _asyncio.ensure_future(
            first.reply(
                "tools/call",
                {"name": "countdown", "arguments": {"count": 6, "delay": 0.1, "size": 0}},
                on_progress=lambda p: seen.append(p["progress"]),
                on_sent=sent.append,
            )
        )
        while len(seen) < 2:
            await _asyncio.sleep(0.01)
        position = first.position(sent[0])
        call.cancel()  # the first client stops reading (a replica that died)
        await _asyncio.gather(call, return_exceptions=True)
        second = Client(url, listen=False, first_id=2000)
        await second.attach(first.version, first.session)
        rest = []
        reply = await second.resume_call(sent[0], position, on_progress=lambda p: rest.append(p["progress"]))
        books = len(first._requests), len(second._requests)
        await second.close()
        await first.close()
        return sent[0], seen, rest, reply, books

    with _running(_reference(store_size=256)) as root:
        ident, seen, rest, reply, books = _asyncio.run(scenario(root + "/mcp"))
    assert books == (0, 0)  # the stopped call's record and the taken-up one's: both gone
    assert ident == 1000 + 1  # first_id: the handshake took 1000
    assert reply["id"] == ident and reply["result"]["content"][0]["text"] == "done"
    assert sorted(set(seen[:2] + rest)) == [1, 2, 3, 4, 5, 6]  # nothing lost
    assert rest[-1] == 6 and rest == sorted(rest)  # resumed after the position, in order


def test_close_without_ending_the_session_hands_it_over_with_no_delete():
    """``close(end_session=False)``, as a gateway replica that stops closes its upstream
    client: no DELETE, the server keeps the session, and another client that attaches goes
    on in it; ``close()`` then ends it with one DELETE."""

    async def main(url, app):
        methods: list[str] = []

        async def sent(request: httpx.Request) -> None:
            methods.append(request.method)

        async with httpx.AsyncClient(
            timeout=httpx.Timeout(30, read=None), event_hooks={"request": [sent]}
        ) as http:
            first = Client(url, profile="2025-11-25", listen=False, http=http)
            await first.connect()
            await first.call_tool("echo", {"text": "a"})
            await first.close(end_session=False)
            handed_over = methods.count("DELETE"), first.session in app.sessions
            second = Client(url, listen=False, http=http)
            await second.attach(first.version, first.session)
            result = await second.call_tool("echo", {"text": "b"})  # the session lives on
            await second.close()
            ended = methods.count("DELETE"), second.session in app.sessions
        return handed_over, result, ended

    app = server()
    with running(app) as base:
        handed_over, result, ended = asyncio.run(main(base + "/mcp", app))
    assert handed_over == (0, True)
    assert text_of(result) == "b"
    assert ended == (1, False)
