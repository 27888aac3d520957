"""Adapters against real servers on 127.0.0.1, started and stopped by these tests:
uvicorn serving ssewire.asgi (and an sse-starlette endpoint), read with httpx, httpx2
and aiohttp, sync and async."""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import aiohttp
import anthropic
import httpx
import httpx2
import openai
import pytest

import ssewire
from ssewire import Event, UnexpectedContentType
from ssewire.aiohttp import aiter_sse as aiohttp_aiter_sse
from ssewire.asgi import WATCH_AFTER, EventStreamResponse
from ssewire.httpx import aconnect_sse, connect_sse, iter_sse
from tests.support.uvicorn_servers import uvicorn_server

TRICKY = [
    Event("message", "hello"),
    Event("update", "multi\nline", "1"),
    Event("message", "\u2028 not a line end \x0b\x0c\u0085 \ufeff", "1"),
    Event("message", "", ""),
    Event("message", "x" * 300_000, "2", 1500),
]
# Raw bytes with a BOM split across writes, CR-only and CRLF line ends split across
# writes, a multi-byte character split across writes, and a declared charset to ignore.
RAW_BODY = [
    b"\xef\xbb",
    b"\xbfdata: a\r",
    b"\ndata: b\r\r",
    b"event: e\rdata: \xc3",
    b"\xa9\r\n\r",
    b"\n: bye\n",
]
RAW_EXPECTED = [Event("message", "a\nb"), Event("e", "\u00e9")]
DISCONNECTED = threading.Event()


def _chunk(text: str) -> bytes:
    return (
        b'{"id":"c1","object":"chat.completion.chunk","created":0,"model":"m",'
        b'"choices":[{"index":0,"delta":{"content":"' + text.encode() + b'"},"finish_reason":null}]}'
    )


# An OpenAI-style stream that is valid SSE but trips the SDKs' own decoder: a leading BOM
# (their first field name becomes "\ufeffdata"), then an id and a keep-alive comment
# block (their decoder emits an empty event for it, and .json() of "" raises).
OPENAI_STREAM = (
    b"\xef\xbb\xbfdata: "
    + _chunk("Hel")
    + b"\n\n"
    + b"id: 1\ndata: "
    + _chunk("lo")
    + b"\n\n"
    + b": keep-alive\n\n"
    + b"data: [DONE]\n\n"
)


def _message_event(kind: str, fields: str) -> bytes:
    return f'event: {kind}\ndata: {{"type":"{kind}"{fields}}}\n\n'.encode()


# An Anthropic-style stream, valid SSE, with a leading BOM: the SDK's own decoder reads it
# into the first field name ("\ufeffevent"), so that event has no type and is dropped.
ANTHROPIC_STREAM = b"\xef\xbb\xbf" + b"".join(
    _message_event(kind, fields)
    for kind, fields in [
        (
            "message_start",
            ',"message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],'
            '"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":0}}',
        ),
        ("content_block_start", ',"index":0,"content_block":{"type":"text","text":""}'),
        ("content_block_delta", ',"index":0,"delta":{"type":"text_delta","text":"Hel"}'),
        ("ping", ""),
        ("content_block_delta", ',"index":0,"delta":{"type":"text_delta","text":"lo"}'),
        ("content_block_stop", ',"index":0'),
        (
            "message_delta",
            ',"delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}',
        ),
        ("message_stop", ""),
    ]
)
ANTHROPIC_TYPES = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
]  # the SDK skips the ping


async def _slow():
    await asyncio.sleep(0.75)
    yield Event("message", "late")


async def _forever():
    try:
        for i in range(2000):  # bounded: 2000 x 10 ms
            yield Event("message", str(i))
            await asyncio.sleep(0.01)
    finally:
        DISCONNECTED.set()


async def app(scope, receive, send):
    path = scope["path"]
    if path == "/events":
        await EventStreamResponse(TRICKY, keepalive=0)(scope, receive, send)
    elif path == "/raw":
        headers = [(b"content-type", b"Text/Event-Stream; charset=latin-1")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for piece in RAW_BODY:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b""})
    elif path == "/accept":
        accept = dict(scope["headers"]).get(b"accept", b"").decode()
        await EventStreamResponse([accept], keepalive=0)(scope, receive, send)
    elif path == "/charset":
        headers = [("Content-Type", "text/event-stream; charset=utf-8")]
        await EventStreamResponse(["x"], keepalive=0, headers=headers)(scope, receive, send)
    elif path == "/blocking":

        def blocking():
            for data in ("a", "b"):
                time.sleep(0.35)
                yield data

        await EventStreamResponse(blocking(), keepalive=0.1)(scope, receive, send)
    elif path == "/slow":
        await EventStreamResponse(_slow(), keepalive=0.2)(scope, receive, send)
    elif path == "/forever":
        await EventStreamResponse(_forever(), keepalive=0)(scope, receive, send)
    elif path == "/v1/chat/completions":
        await receive()  # the request body
        await EventStreamResponse([OPENAI_STREAM], keepalive=0)(scope, receive, send)
    elif path == "/v1/messages":
        await receive()
        await EventStreamResponse([ANTHROPIC_STREAM], keepalive=0)(scope, receive, send)
    elif path == "/starlette":
        from sse_starlette.sse import EventSourceResponse

        async def events():
            for event in TRICKY:
                yield {"data": event.data, "event": event.type, "id": event.id or None, "retry": event.retry}

        await EventSourceResponse(events(), ping=1)(scope, receive, send)
    else:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": b"{}"})


@pytest.fixture(scope="module")
def base_url():
    with uvicorn_server(app) as url:
        yield url


def test_httpx_sync(base_url):
    with httpx.Client(timeout=10) as client, connect_sse(client, "GET", f"{base_url}/events") as source:
        assert list(source.iter_sse()) == TRICKY
        assert source.decoder.discarded == 0


def test_httpx_async(base_url):
    async def main():
        async with httpx.AsyncClient(timeout=10) as client:
            async with aconnect_sse(client, "GET", f"{base_url}/events") as source:
                return [event async for event in source.aiter_sse()]

    assert asyncio.run(main()) == TRICKY


def test_httpx2_sync(base_url):
    with httpx2.Client(timeout=10) as client, connect_sse(client, "GET", f"{base_url}/events") as source:
        assert list(source.iter_sse()) == TRICKY


def test_aiohttp(base_url):
    async def main():
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base_url}/events", timeout=aiohttp.ClientTimeout(total=10)) as response:
                return [event async for event in aiohttp_aiter_sse(response)]

    assert asyncio.run(main()) == TRICKY


def test_tricky_bytes_through_every_client(base_url):
    with httpx.Client(timeout=10) as client, client.stream("GET", f"{base_url}/raw") as response:
        assert list(iter_sse(response)) == RAW_EXPECTED

    async def main():
        async with aiohttp.ClientSession() as session, session.get(f"{base_url}/raw") as response:
            return [event async for event in aiohttp_aiter_sse(response)]

    assert asyncio.run(main()) == RAW_EXPECTED


def test_sse_starlette_endpoint(base_url):
    # sse-starlette writes CRLF and omits an empty id, so the last event ID persists there.
    expected = [*TRICKY[:3], TRICKY[3]._replace(id="1"), TRICKY[4]]
    with httpx.Client(timeout=10) as client, connect_sse(client, "GET", f"{base_url}/starlette") as source:
        assert list(source.iter_sse()) == expected


def test_wrong_content_type_is_a_clear_error(base_url):
    with httpx.Client(timeout=10) as client, connect_sse(client, "GET", f"{base_url}/json") as source:
        with pytest.raises(UnexpectedContentType, match="application/json"):
            list(source.iter_sse())


def test_accept_header_is_added_only_when_missing(base_url):
    with httpx.Client(timeout=10) as client:
        with connect_sse(client, "GET", f"{base_url}/accept") as source:
            assert [e.data for e in source.iter_sse()] == ["text/event-stream"]
        mcp = "application/json, text/event-stream"
        with connect_sse(client, "GET", f"{base_url}/accept", headers={"accept": mcp}) as source:
            assert [e.data for e in source.iter_sse()] == [mcp]


def test_accept_header_on_the_client_or_with_bytes_names_is_kept(base_url):
    mcp = "application/json, text/event-stream"
    with httpx.Client(timeout=10, headers={"Accept": mcp}) as client:
        with connect_sse(client, "GET", f"{base_url}/accept") as source:
            assert [e.data for e in source.iter_sse()] == [mcp]
    with httpx.Client(timeout=10) as client:
        with connect_sse(client, "GET", f"{base_url}/accept", headers=[(b"Accept", mcp.encode())]) as source:
            assert [e.data for e in source.iter_sse()] == [mcp]


def test_caller_headers_replace_the_defaults(base_url):
    with httpx.Client(timeout=10) as client, client.stream("GET", f"{base_url}/charset") as response:
        assert response.headers.get_list("content-type") == ["text/event-stream; charset=utf-8"]
        assert list(iter_sse(response)) == [Event("message", "x")]


def test_a_blocking_sync_iterator_does_not_stall_keepalives(base_url):
    with httpx.Client(timeout=10) as client, connect_sse(client, "GET", f"{base_url}/blocking") as source:
        assert [e.data for e in source.iter_sse()] == ["a", "b"]
        assert source.decoder.comments >= 2  # sent while the generator slept in its thread


def test_keepalive_comments_while_idle(base_url):
    with httpx.Client(timeout=10) as client, connect_sse(client, "GET", f"{base_url}/slow") as source:
        assert [e.data for e in source.iter_sse()] == ["late"]
        assert 2 <= source.decoder.comments <= 4  # 0.75 s idle, one ping per 0.2 s


def test_client_disconnect_stops_the_stream(base_url):
    DISCONNECTED.clear()
    read = []
    with httpx.Client(timeout=10) as client, connect_sse(client, "GET", f"{base_url}/forever") as source:
        for event in source.iter_sse():
            read.append(event.data)
            if len(read) == 3:
                break
    assert read == ["0", "1", "2"]  # the stream was live when the client left
    assert DISCONNECTED.wait(10), "the server kept streaming after the client left"


def _openai_text(client_cls, base_url) -> str:
    client = client_cls(base_url=f"{base_url}/v1", api_key="test-key-not-a-secret", max_retries=0)
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream)


def test_openai_sdk_decoder_hook(base_url):
    class Client(openai.OpenAI):
        def _make_sse_decoder(self, options=None):  # docs/quickstart.md's recipe; openai passes nothing
            return ssewire.SSEBytesDecoder()

    assert _openai_text(Client, base_url) == "Hello"
    # The SDK's own decoder mis-reads the same bytes (the point of the hook).
    with pytest.raises(ValueError):  # json.JSONDecodeError on the empty keep-alive "event"
        _openai_text(openai.OpenAI, base_url)


def _anthropic_events(client_cls, base_url) -> tuple[list[str], str]:
    """The types of the events the client yields, and the text of their deltas."""
    client = client_cls(base_url=base_url, api_key="test-key-not-a-secret", max_retries=0)
    stream = client.messages.create(
        model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    events = list(stream)
    text = "".join(event.delta.text for event in events if event.type == "content_block_delta")
    return [event.type for event in events], text


def test_anthropic_sdk_decoder_hook(base_url):
    class Client(anthropic.Anthropic):
        def _make_sse_decoder(self, options=None):  # anthropic passes the request's options
            return ssewire.SSEBytesDecoder()

    assert _anthropic_events(Client, base_url) == (ANTHROPIC_TYPES, "Hello")
    # The SDK's own decoder silently loses the event that opens the message.
    assert _anthropic_events(anthropic.Anthropic, base_url) == (ANTHROPIC_TYPES[1:], "Hello")


def test_sse_bytes_decoder_events_have_the_sdk_shape():
    async def chunks():
        yield b'event: delta\nid: 4\nretry: 9\ndata: {"a": 1}\n\n'

    async def collect():
        return [event async for event in ssewire.SSEBytesDecoder().aiter_bytes(chunks())]

    (event,) = asyncio.run(collect())
    assert (event.event, event.data, event.id, event.retry, event.json()) == (
        "delta",
        '{"a": 1}',
        "4",
        9,
        {"a": 1},
    )
    assert event == Event("delta", '{"a": 1}', "4", 9)
    (sync_event,) = ssewire.SSEBytesDecoder().iter_bytes([b"\xef\xbb\xbfdata: x\n\n"])
    assert sync_event.data == "x" and sync_event.event is None  # the default type, as the SDKs report it


def test_asgi_refuses_an_unserialisable_item_and_never_ends_the_stream_cleanly():
    sent: list[dict] = []

    async def receive():
        await asyncio.sleep(10)  # the client stays; the app must not wait for it
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    app = EventStreamResponse([Event("message", "ok"), object(), Event("message", "never")], keepalive=0)
    with pytest.raises(TypeError, match="cannot send object as an event"):
        asyncio.run(asyncio.wait_for(app({"type": "http"}, receive, send), 5))
    assert sent[0]["type"] == "http.response.start"
    assert [m["body"] for m in sent[1:]] == [b"data: ok\n\n"]  # what came before the bad item
    assert all(m["more_body"] for m in sent[1:])  # no clean end: the server fails the response
    with pytest.raises(ValueError, match="keepalive"):
        EventStreamResponse([], keepalive=-1)


def _tasks_made(response: EventStreamResponse, receive, send) -> int:
    """Run ``response`` to its end (5 s at most); the tasks made while it ran."""
    tasks = 0

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def counting(loop, coro, **kwargs):
            nonlocal tasks
            tasks += 1
            return asyncio.Task(coro, loop=loop, **kwargs)

        loop.set_task_factory(counting)
        try:
            await response({"type": "http"}, receive, send)
        finally:
            loop.set_task_factory(None)

    asyncio.run(asyncio.wait_for(main(), 5))
    return tasks


def test_asgi_writes_each_item_without_a_task_of_its_own_and_keepalives_only_between_items():
    """A relay's hot path: the tasks a response makes do not grow with its items (the
    caller's own pumps them, one more waits for the disconnect), and a keep-alive never
    lands inside an item whose write is held up by a slow client."""
    sent: list[bytes] = []

    async def receive():
        await asyncio.sleep(10)
        return {"type": "http.disconnect"}

    async def send(message):
        body = message.get("body", b"")
        if body.startswith(b"data: slow"):
            await asyncio.sleep(0.3)  # the client reads slowly: a keep-alive falls due meanwhile
        sent.append(body)

    async def items():
        for n in range(1000):
            yield Event("message", str(n))
        yield Event("message", "slow")
        await asyncio.sleep(0.3)  # idle: now keep-alives go
        yield Event("message", "last")

    tasks = _tasks_made(EventStreamResponse(items(), keepalive=0.1), receive, send)
    if sys.version_info >= (3, 11):
        assert tasks == 1  # the disconnect's watch: not one per item, none to pump
    else:  # (before 3.11 each of the watch's timed waits is a task of asyncio.wait_for's)
        assert 1 < tasks < 20
    bodies = [body for body in sent if body]
    assert bodies[:1000] == [f"data: {n}\n\n".encode() for n in range(1000)]
    assert bodies[1000] == b"data: slow\n\n"  # no keep-alive went in while it was being written
    assert b": keep-alive\n" in bodies[1001:-1] and bodies[-1] == b"data: last\n\n"


def test_asgi_a_response_over_at_once_makes_no_task_and_asks_the_client_nothing():
    """A relayed short call's stream: its items come and it ends before `WATCH_AFTER`, so
    no watcher task is made (a timer stands in for it) and the client is never asked."""
    asked = 0

    async def receive():
        nonlocal asked
        asked += 1
        return {"type": "http.disconnect"}

    sent: list[bytes] = []

    async def send(message):
        sent.append(message.get("body", b""))

    async def items():
        for n in range(3):
            await asyncio.sleep(0)  # each item a step of its own, as a relay's come
            yield Event("message", str(n))

    tasks = _tasks_made(EventStreamResponse(items(), keepalive=15), receive, send)
    assert (tasks, asked) == (0, 0)
    assert sent[1:] == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n", b""]


def test_asgi_takes_any_async_iterable_and_closes_it_once():
    """An iterable whose iterator has only ``__anext__`` (``async for`` takes it), and an
    iterator of its own with an ``aclose`` that must not run twice."""
    closed = 0

    class Numbers:  # the iterator: __anext__ alone
        def __init__(self) -> None:
            self.left = 2

        async def __anext__(self) -> Event:
            if not self.left:
                raise StopAsyncIteration
            self.left -= 1
            return Event("message", str(self.left))

    class Source:
        def __aiter__(self) -> Numbers:
            return Numbers()

    class Closing(Numbers):  # its own iterator, closed once
        def __aiter__(self) -> Closing:
            return self

        async def aclose(self) -> None:
            nonlocal closed
            closed += 1

    async def receive():
        await asyncio.sleep(10)
        return {"type": "http.disconnect"}

    for source in (Source(), Closing()):
        sent: list[bytes] = []

        async def send(message, sent=sent):
            sent.append(message.get("body", b""))

        asyncio.run(EventStreamResponse(source, keepalive=0)({"type": "http"}, receive, send))
        assert sent[1:] == [b"data: 1\n\n", b"data: 0\n\n", b""]
    assert closed == 1


def test_asgi_a_watcher_that_outlives_its_cancellation_never_stops_a_finished_response():
    """Before 3.12 ``asyncio.wait_for`` (what the watcher's waits are before 3.11) can lose a
    cancellation to a result already there, so a watcher told to end may go on and see the
    client leave: a response already over is not cancelled for it (its caller got a
    CancelledError out of a response that had ended cleanly)."""
    sent: list[dict] = []

    async def receive():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # lost, as wait_for may lose it: the client's message "came" instead
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    async def items():
        yield Event("message", "a")
        await asyncio.sleep(WATCH_AFTER + 0.15)  # the watcher is running by now
        yield Event("message", "b")

    asyncio.run(
        asyncio.wait_for(EventStreamResponse(items(), keepalive=0)({"type": "http"}, receive, send), 5)
    )
    assert [m.get("body") for m in sent[1:]] == [b"data: a\n\n", b"data: b\n\n", b""]
    assert sent[-1]["more_body"] is False  # ended cleanly


def _client_leaving_at(left: asyncio.Event):
    """An ASGI client that reads everything and disconnects once ``left`` is set."""

    async def receive():
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        pass

    return receive, send


async def _one_item_then_silence(closed: list[str], name: str):
    """One event, then a wait for one that never comes; ``name`` is noted in ``closed`` at its end."""
    try:
        yield Event("message", "first")
        await asyncio.sleep(30)
    finally:
        closed.append(name)


def test_asgi_disconnect_ends_the_response_in_the_callers_task_and_closes_the_items():
    """The pump runs in the caller's task, which the disconnect's watch stops: the response
    then returns normally (its caller is not left cancelled) and the items are closed;
    the caller's own cancellation still goes through."""
    closed: list[str] = []
    left = asyncio.Event()
    receive, send = _client_leaving_at(left)

    async def main() -> None:
        task = asyncio.ensure_future(
            EventStreamResponse(_one_item_then_silence(closed, "left"), keepalive=0)(
                {"type": "http"}, receive, send
            )
        )
        await asyncio.sleep(0.05)
        left.set()
        await asyncio.wait_for(task, 5)  # returns: no CancelledError out of a client leaving
        if sys.version_info >= (3, 11):
            assert task.cancelling() == 0
        left.clear()
        caller = asyncio.ensure_future(
            EventStreamResponse(_one_item_then_silence(closed, "cancelled"), keepalive=0)(
                {"type": "http"}, receive, send
            )
        )
        await asyncio.sleep(0.05)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller

    asyncio.run(main())
    assert closed == ["left", "cancelled"]


@pytest.mark.skipif(
    sys.version_info < (3, 11), reason="before 3.11 a task cannot tell two cancellations apart"
)
def test_asgi_the_callers_cancellation_in_the_step_the_client_leaves_is_not_lost():
    closed: list[str] = []
    left = asyncio.Event()
    receive, send = _client_leaving_at(left)

    async def main() -> None:
        response = asyncio.ensure_future(
            EventStreamResponse(_one_item_then_silence(closed, "items"), keepalive=0)(
                {"type": "http"}, receive, send
            )
        )
        await asyncio.sleep(0.05)
        left.set()  # the watcher stops the pump...
        response.cancel()  # ...and the caller cancels it, in the same step
        with pytest.raises(asyncio.CancelledError):
            await response

    asyncio.run(main())
    assert closed == ["items"]


def test_asgi_a_keepalive_waits_while_an_item_is_written_without_spinning():
    """A keep-alive due while a slow client holds an item's write waits a keep-alive period
    at a time (the write's end resets the pace), never asking for the client's next message
    in a loop."""
    asked = 0

    async def receive():
        nonlocal asked
        asked += 1
        await asyncio.sleep(10)
        return {"type": "http.disconnect"}

    async def send(message):
        if message.get("body", b"").startswith(b"data: slow"):
            await asyncio.sleep(0.5)

    async def items():
        yield Event("message", "slow")

    asyncio.run(
        asyncio.wait_for(EventStreamResponse(items(), keepalive=0.05)({"type": "http"}, receive, send), 5)
    )
    assert (
        asked <= 0.5 / 0.05 + 3
    )  # once a keep-alive period (it was thousands: each pass asked again at once)


def test_asgi_a_keepalive_that_fails_its_callers_way_is_raised_by_the_response():
    async def receive():
        await asyncio.sleep(10)
        return {"type": "http.disconnect"}

    async def send(message):
        if message.get("body", b"").startswith(b":"):
            raise RuntimeError("the server refused the write")

    async def items():
        yield Event("message", "first")
        await asyncio.sleep(30)

    with pytest.raises(RuntimeError, match="refused the write"):
        asyncio.run(
            asyncio.wait_for(EventStreamResponse(items(), keepalive=0.05)({"type": "http"}, receive, send), 5)
        )


def test_importing_ssewire_does_not_import_clients():
    import subprocess
    import sys

    code = "import sys, ssewire; print(any(m in sys.modules for m in ('httpx', 'aiohttp', 'uvicorn', 'starlette')))"
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        ).stdout.strip()
        == "False"
    )


# -- an aiohttp server, read by every client ----------------------------------------------


@pytest.fixture(scope="module")
def aiohttp_url():
    from aiohttp import web

    async def stream(request):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in RAW_BODY:  # written piece by piece: BOM, CR and UTF-8 splits on the wire
            await response.write(piece)
            await asyncio.sleep(0.01)
        await response.write(b"data: " + b"y" * 200_000 + b"\r\n\r\n")
        return response

    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state = {}

    async def start():
        app = web.Application()
        app.router.add_get("/stream", stream)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["runner"] = runner
        state["port"] = site._server.sockets[0].getsockname()[1]
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop)
    assert ready.wait(15), "aiohttp server did not start"
    yield f"http://127.0.0.1:{state['port']}/stream"
    asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(15)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(15)


AIOHTTP_EXPECTED = [*RAW_EXPECTED, Event("message", "y" * 200_000)]


def test_aiohttp_server_with_httpx_sync_and_async(aiohttp_url):
    with httpx.Client(timeout=10) as client, connect_sse(client, "GET", aiohttp_url) as source:
        assert list(source.iter_sse()) == AIOHTTP_EXPECTED

    async def main():
        async with httpx.AsyncClient(timeout=10) as client:
            async with aconnect_sse(client, "GET", aiohttp_url) as source:
                return [event async for event in source.aiter_sse()]

    assert asyncio.run(main()) == AIOHTTP_EXPECTED


def test_aiohttp_server_with_aiohttp_client(aiohttp_url):
    async def main():
        async with aiohttp.ClientSession() as session, session.get(aiohttp_url) as response:
            return [event async for event in aiohttp_aiter_sse(response)]

    assert asyncio.run(main()) == AIOHTTP_EXPECTED
