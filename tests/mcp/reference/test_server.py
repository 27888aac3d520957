"""The reference server's own contracts: faults are a typed set checked at start-up, the
tasks it spawns are owned (failures kept and logged, cancelled and awaited at shutdown),
and every stream it opens ends, so no reader or resuming GET waits on a dead producer.

Servers run on 127.0.0.1 (uvicorn threads started here); every wait has a deadline.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import gc
import itertools
import json
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from ssewire._errors import InputError
from ssewire.mcp.reference import server as server_module
from ssewire.mcp.reference.faults import FAULTS, Fault, UnknownFault
from ssewire.mcp.reference.server import ReferenceServer
from ssewire.mcp.reference.tools import filler, integer_argument
from ssewire.mcp.transport.serving import running

BOTH = "application/json, text/event-stream"
SSE = "text/event-stream"
DEADLINE = 10.0  # seconds any one read may take here; a hang fails the test instead


# -- faults, typed ------------------------------------------------------------------


def test_an_unknown_fault_name_is_refused_when_the_server_is_made():
    with pytest.raises(UnknownFault, match="strict-acept") as raised:
        ReferenceServer(faults=["strict-accept", "strict-acept"])
    assert isinstance(raised.value, InputError)  # the CLI turns it into exit 2
    assert "strict-accept" in str(raised.value)  # the known names are listed


def test_fault_names_become_members_of_the_typed_set():
    server = ReferenceServer(faults=["no-get", "buffered-stream"])
    assert server.faults == {Fault.NO_GET, Fault.BUFFERED_STREAM}
    assert all(type(fault) is Fault for fault in server.faults)
    assert [fault.value for fault in Fault] == list(FAULTS)  # the registry the tests iterate
    assert all(FAULTS[name] is Fault(name) and FAULTS[name].diagnostic for name in FAULTS)


def test_the_server_tests_faults_as_members_and_uses_every_one():
    """A string test (``"no-get" in self.faults``) would let a typo disable a fault silently."""
    tree = ast.parse(Path(server_module.__file__).read_text())
    tested: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn))):
            continue
        container = node.comparators[0]
        if isinstance(container, ast.Attribute) and container.attr == "faults":
            left = node.left
            assert isinstance(left, ast.Attribute) and ast.unparse(left.value) == "Fault", ast.unparse(node)
            tested.add(left.attr)
    assert tested == {fault.name for fault in Fault}


# -- helpers ------------------------------------------------------------------------


def _rpc(ident: object, method: str, **params: object) -> dict:
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}


def _open_session(client: httpx.Client, url: str) -> str:
    init = _rpc(0, "initialize", protocolVersion="2025-11-25", capabilities={}, clientInfo={"name": "t"})
    answer = client.post(url, json=init, headers={"accept": BOTH})
    assert answer.status_code == 200
    return answer.headers["mcp-session-id"]


def _events(text: str) -> list[tuple[str | None, dict | None]]:
    """(id, message) of each event in an SSE body (a priming event's message is None)."""
    found = []
    for block in re.split(r"\n\n", text):
        ident = re.search(r"^id: (.*)$", block, re.M)
        data = re.search(r"^data: (.+)$", block, re.M)
        if ident or data:
            found.append((ident and ident.group(1), json.loads(data.group(1)) if data else None))
    return found


def _follow(url: str, session: str, cursor: str) -> str:
    """A GET resuming the stream after ``cursor``, read to its end (or a read timeout)."""
    headers = {"accept": "text/event-stream", "mcp-session-id": session, "last-event-id": cursor}
    with httpx.Client(timeout=DEADLINE) as client:
        answer = client.get(url, headers=headers)
    assert answer.status_code == 200
    return answer.text


# -- the server core's one event-log convention -----------------------------------------


def test_the_log_holds_message_bytes_and_the_ids_on_the_wire_are_the_server_cores_scheme():
    """What the reference server's log holds is what the gateway's holds: a message's bytes
    (the priming event's empty), never SSE framing; an id on the wire is ``<stream>-<seq>``,
    the event's place in its stream, read back by the core's parse_event_id to resume."""
    from ssewire.mcp.server.log import parse_event_id

    app = ReferenceServer(countdown_delay=0.0)
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + "/mcp"
        session = _open_session(client, url)
        headers = {"accept": BOTH, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        call = _rpc(1, "tools/call", name="countdown", arguments={"count": 3, "size": 10})
        events = _events(client.post(url, json=call, headers=headers).text)
        places = [parse_event_id(ident) for ident, _ in events]
        number = places[0][0]
        (stream,) = [each for each in app.log.streams.values() if each.key[1] == number]
        stored = list(stream.events)
    assert len(events) >= 2 and places == [(number, seq) for seq in range(1, len(events) + 1)]
    assert [json.loads(data) if data else None for _, data, _ in stored] == [m for _, m in events]


# -- a producer that fails ------------------------------------------------------------


def test_a_failing_producer_answers_with_an_error_and_ends_every_reader(monkeypatch, caplog):
    """countdown's result cannot be made: the POST reader and a GET resuming the same stream
    (waiting before the failure) both end, with -32603 for the call; the failure is kept."""

    def broken_filler(size: int) -> str:
        raise RuntimeError("the tool broke")

    monkeypatch.setattr(server_module, "filler", broken_filler)
    app = ReferenceServer(countdown_delay=0.05, keepalive=0.2)
    call = _rpc("c1", "tools/call", name="countdown", arguments={"count": 4}, _meta={"progressToken": "p"})
    caplog.set_level(logging.ERROR, logger=server_module.__name__)
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client, ThreadPoolExecutor(1) as pool:
        url = base + app.path
        session = _open_session(client, url)
        headers = {"accept": BOTH, "mcp-session-id": session}
        with client.stream("POST", url, json=call, headers=headers) as answer:
            lines = answer.iter_lines()
            priming = next(line for line in lines if line.startswith("id: "))[4:]
            follower = pool.submit(_follow, url, session, priming)  # resumes while it runs
            posted = "\n".join(lines)
        followed = follower.result(timeout=DEADLINE)
        # a finished task leaves the set in its done callback, a loop step later: only those
        # are waited for (a task still running is left, and fails the assertion below)
        settle = time.monotonic() + 2
        while any(task.done() for task in list(app.tasks)) and time.monotonic() < settle:
            time.sleep(0.01)
        tasks_left = set(app.tasks)
    failure = {
        "jsonrpc": "2.0",
        "id": "c1",
        "error": {"code": -32603, "message": "Internal error: the tool failed"},
    }
    for body in (posted, followed):
        messages = [message for _, message in _events(body) if message is not None]
        assert messages[-1] == failure
        assert [m["params"]["progress"] for m in messages[:-1]] == [1, 2, 3, 4]
    assert tasks_left == set()
    assert [str(error) for error in app.errors] == ["the tool broke"]
    assert any(record.exc_info and "the tool broke" in str(record.exc_info[1]) for record in caplog.records)


def test_a_stream_resumed_after_its_producer_failed_ends_too(monkeypatch):
    monkeypatch.setattr(server_module, "filler", lambda size: 1 / 0)
    app = ReferenceServer(countdown_delay=0.0, keepalive=0.2)
    call = _rpc("c2", "tools/call", name="countdown", arguments={"count": 1})
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        session = _open_session(client, url)
        posted = client.post(url, json=call, headers={"accept": BOTH, "mcp-session-id": session})
        priming = _events(posted.text)[0][0]
        followed = _follow(url, session, priming)
    assert _events(followed)[-1][1]["error"]["code"] == -32603
    assert [type(error) for error in app.errors] == [ZeroDivisionError]


def test_a_failed_task_is_retrieved_never_left_for_asyncio_to_report():
    """asyncio logs "Task exception was never retrieved" for a failed task nobody read."""
    reported: list[dict] = []

    async def main() -> ReferenceServer:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        app = ReferenceServer()

        async def broken() -> None:
            raise ValueError("broken producer")

        app._spawn(broken())
        await asyncio.wait(set(app.tasks), timeout=DEADLINE)  # waits without reading the result
        await asyncio.sleep(0)  # let the done callbacks run
        gc.collect()  # a never-retrieved exception is reported when its task is collected
        return app

    app = asyncio.run(main())
    gc.collect()
    assert reported == []
    assert app.tasks == set() and [str(e) for e in app.errors] == ["broken producer"]


def test_errors_kept_are_bounded():
    app = ReferenceServer()
    assert app.errors.maxlen == server_module.MAX_ERRORS


# -- shutdown -------------------------------------------------------------------------


def test_the_lifespan_shutdown_cancels_and_awaits_running_producers():
    """Checked as the app reports shutdown complete, before anything else could clean up."""
    received = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[str] = []

    async def receive() -> dict:
        return next(received)

    async def send(message: dict) -> None:
        if message["type"] == "lifespan.shutdown.complete":
            assert app.tasks == set() and task.cancelled() and stream.done
        sent.append(message["type"])

    async def main() -> None:
        nonlocal app, task, stream
        app = ReferenceServer(countdown_delay=5.0)
        session = app._new_session(_rpc(0, "initialize"))
        stream = app._open_stream(session)
        app._spawn(
            app._produce(session, stream, "long", app._countdown(session, stream, None, 1000, 5.0, 10))
        )
        (task,) = app.tasks
        await asyncio.sleep(0)  # the producer starts its first pause
        await app({"type": "lifespan"}, receive, send)

    app = task = stream = None
    asyncio.run(main())
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert list(app.errors) == []  # a cancellation is no failure


def test_a_producer_nobody_reads_runs_until_the_server_stops_and_its_stream_ends():
    """A countdown whose reader left goes on (a client may resume it); stopping the server
    cancels it, and its stream ends rather than leave a resuming reader waiting."""
    app = ReferenceServer(countdown_delay=0.5, keepalive=0.2)
    call = _rpc("long", "tools/call", name="countdown", arguments={"count": 1000, "size": 10})
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        session = _open_session(client, url)
        with client.stream(
            "POST", url, json=call, headers={"accept": BOTH, "mcp-session-id": session}
        ) as answer:
            next(line for line in answer.iter_lines() if line.startswith("id: "))
        (task,) = app.tasks  # the reader left; the producer goes on
        assert not task.done()
    assert task.cancelled()
    assert app.tasks == set() and list(app.errors) == []
    streams = [stream for each in app.sessions.values() for stream in each.streams.values()]
    assert streams and all(stream.done for stream in streams)


def test_aclose_without_tasks_returns():
    asyncio.run(ReferenceServer().aclose())


# -- bounds against a hostile client ----------------------------------------------------


async def _asgi_post(
    app: ReferenceServer, chunks, headers: dict[str, str] | None = None, *, limit: int = 100_000
) -> tuple[list[dict], int]:
    """POST ``chunks`` (an iterable of body pieces) straight to the ASGI app: the messages it
    sent, and how many body pieces it asked for (at most ``limit``)."""
    pieces = iter(chunks)
    asked = 0
    sent: list[dict] = []

    async def receive() -> dict:
        nonlocal asked
        asked += 1
        if asked > limit:
            raise AssertionError("the server read on past any limit")
        piece = next(pieces, None)
        return {"type": "http.request", "body": piece or b"", "more_body": piece is not None}

    async def send(message: dict) -> None:
        sent.append(message)

    head = {"host": "127.0.0.1", "accept": BOTH, "content-type": "application/json", **(headers or {})}
    scope = {
        "type": "http",
        "method": "POST",
        "path": app.path,
        "headers": [(k.encode(), v.encode()) for k, v in head.items()],
    }
    await asyncio.wait_for(app(scope, receive, send), DEADLINE)
    return sent, asked


def _answer(sent: list[dict]) -> tuple[int, dict[str, str], dict]:
    start = sent[0]
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, json.loads(b"".join(m.get("body", b"") for m in sent[1:]))


def test_a_body_over_the_limit_is_refused_413_and_read_no_further():
    """An endless body: the server asks for pieces until it holds more than max_body, then
    answers 413 with a JSON-RPC error naming the limit, and closes the connection."""
    app = ReferenceServer(max_body=10_000)
    endless = itertools.repeat(b" " * 1000)
    sent, asked = asyncio.run(_asgi_post(app, endless))
    status, headers, body = _answer(sent)
    assert status == 413 and headers["connection"] == "close"
    assert body["error"]["code"] == -32600 and "10000 bytes" in body["error"]["message"]
    assert asked == 11  # 11,000 bytes: one piece past the limit, no more


def test_a_content_length_over_the_limit_is_refused_before_a_byte_is_read():
    app = ReferenceServer(max_body=10_000)
    sent, asked = asyncio.run(_asgi_post(app, [b"x" * 20_000], {"content-length": "20000"}))
    assert _answer(sent)[0] == 413 and asked == 0


def test_an_integral_number_is_an_integer_argument():
    """JSON Schema's integer: 2.0 is one, so countdown takes it."""
    assert integer_argument({"count": 2.0}, "count", 20, high=10) == 2
    assert integer_argument({"count": 10**6}, "count", 20, high=10) == 10


def test_a_body_at_the_limit_is_served():
    init = json.dumps(_rpc(0, "initialize", protocolVersion="2025-11-25", capabilities={})).encode()
    padded = init + b" " * (1000 - len(init))
    sent, _ = asyncio.run(_asgi_post(ReferenceServer(max_body=1000), [padded[:500], padded[500:]]))
    assert sent[0]["status"] == 200


def test_a_hostile_body_is_refused_through_uvicorn_and_the_connection_closed():
    """Over a real connection: a chunked body of 64 MiB gets 413 after the first MiB or so,
    the server having stopped reading (the client does not get to send it all)."""
    from tests.support.hostile_clients import endless_body

    app = ReferenceServer()
    with running(app) as base:
        outcome = endless_body(int(base.rsplit(":", 1)[1]), 64 << 20)
    assert outcome.status == 413
    assert outcome.how in ("answered", "closed") and outcome.sent < 32 << 20


def _initialize(client: httpx.Client, url: str, version: str = "2025-11-25") -> httpx.Response:
    init = _rpc(0, "initialize", protocolVersion=version, capabilities={}, clientInfo={"name": "t"})
    return client.post(url, json=init, headers={"accept": BOTH})


def _ping(client: httpx.Client, url: str, session: str) -> int:
    answer = client.post(url, json=_rpc(1, "ping"), headers={"accept": BOTH, "mcp-session-id": session})
    return answer.status_code


def test_at_the_session_cap_the_least_recently_used_session_makes_room():
    app = ReferenceServer(max_sessions=2)
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        first, second = _open_session(client, url), _open_session(client, url)
        assert _ping(client, url, first) == 200  # first is now used more recently than second
        # (its answer is read before the server's request task ends: a loaded machine may
        # still count first or second as working, and then nothing may make room)
        _wait_for(lambda: not any(each.working for each in app.sessions.values()))
        third = _open_session(client, url)
        assert [_ping(client, url, s) for s in (first, second, third)] == [200, 404, 200]
        assert list(app.sessions) == [first, third]


def test_when_every_session_is_working_a_new_one_is_refused_503_with_retry_after():
    """Two sessions each with a tool call streaming: a third initialize is refused, nothing
    in flight is cut; once the calls end, a session makes room."""
    app = ReferenceServer(max_sessions=2, keepalive=0.2)
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        sessions = [_open_session(client, url) for _ in range(2)]
        call = _rpc(5, "tools/call", name="countdown", arguments={"count": 40, "delay": 0.05})
        with contextlib.ExitStack() as streams:
            for session in sessions:
                post = client.stream(
                    "POST", url, json=call, headers={"accept": BOTH, "mcp-session-id": session}
                )
                assert streams.enter_context(post).status_code == 200
            _wait_for(lambda: all(each.working for each in app.sessions.values()))
            refused = _initialize(client, url)
            assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
            assert refused.json()["error"]["code"] == -32000
            assert "mcp-session-id" not in refused.headers
            assert list(app.sessions) == sessions
        _wait_for(lambda: not any(each.working for each in app.sessions.values()))
        assert _initialize(client, url).status_code == 200
        assert len(app.sessions) == 2


def test_sessions_only_listening_make_room_and_their_stream_ends():
    """A GET stream open is no work in flight: two clients each holding one cannot lock a
    third out; the least recently used is dropped and its stream ends (then 404)."""
    app = ReferenceServer(max_sessions=2, keepalive=0.2)
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        sessions = [_open_session(client, url) for _ in range(2)]
        with contextlib.ExitStack() as streams:
            gets = []
            for session in sessions:
                get = client.stream("GET", url, headers={"accept": SSE, "mcp-session-id": session})
                gets.append(streams.enter_context(get))
            _wait_for(lambda: all(each.open_streams == 1 for each in app.sessions.values()))
            assert _initialize(client, url).status_code == 200
            assert sessions[0] not in app.sessions and sessions[1] in app.sessions
            for _ in gets[0].iter_bytes():  # ends: the dropped session's stream closed (a read
                pass  # past DEADLINE would raise ReadTimeout instead)
            assert not gets[1].is_closed
        assert _ping(client, url, sessions[0]) == 404


def _wait_for(condition, deadline: float = DEADLINE) -> None:
    """Poll ``condition`` (a state the server reaches on its own thread), bounded in time."""
    import time

    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "the server did not get there in time"
        time.sleep(0.01)


def test_a_flood_of_initializes_keeps_the_sessions_at_the_cap():
    app = ReferenceServer(max_sessions=8)
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        early = _open_session(client, url)
        statuses = {_initialize(client, url).status_code for _ in range(40)}
        assert statuses == {200} and len(app.sessions) == 8
        assert _ping(client, url, early) == 404  # the client initializes again


class _Clock:
    """The server's clock, moved on by the test once the server is done with what it was
    sent (a stream's end counts as use: moving on before it would date that use later)."""

    def __init__(self, app: ReferenceServer) -> None:
        self.now = 1000.0
        self.app = app
        app.clock = self

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float, *, streams_open: int = 0) -> None:
        _wait_for(lambda: sum(each.open_streams for each in self.app.sessions.values()) == streams_open)
        self.now += seconds


def test_an_idle_session_is_dropped_after_the_timeout():
    app = ReferenceServer(session_idle_timeout=60)
    clock = _Clock(app)
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        kept, dropped = _open_session(client, url), _open_session(client, url)
        clock.advance(40)
        assert _ping(client, url, kept) == 200
        clock.advance(30)  # dropped idle 70 s, kept 30 s
        assert _ping(client, url, dropped) == 404
        assert _ping(client, url, kept) == 200
        assert list(app.sessions) == [kept]


def test_a_session_with_an_open_stream_or_a_running_tool_is_never_idle():
    """Idle means no request and no open stream: a GET stream held open for longer than the
    timeout keeps its session, and so does a producer a client may still resume; the idle
    time counts from the end of the stream."""
    app = ReferenceServer(session_idle_timeout=60, keepalive=0.2, countdown_delay=0.5)
    clock = _Clock(app)
    call = _rpc("long", "tools/call", name="countdown", arguments={"count": 1000, "size": 10})
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        listening, working = _open_session(client, url), _open_session(client, url)
        headers = {"accept": SSE, "mcp-session-id": listening}
        with client.stream("GET", url, headers=headers):
            with client.stream(
                "POST", url, json=call, headers={"accept": BOTH, "mcp-session-id": working}
            ) as r:
                next(line for line in r.iter_lines() if line.startswith("id: "))
            _wait_for(lambda: app.sessions[working].open_streams == 0 and app.sessions[working].tasks)
            clock.advance(3600, streams_open=1)
            _initialize(client, url)  # any request sweeps
            assert {listening, working} <= set(app.sessions)
        _wait_for(lambda: app.sessions[listening].open_streams == 0)
        clock.advance(59)
        assert _ping(client, url, listening) == 200
        clock.advance(61)
        assert _ping(client, url, listening) == 404
        assert working in app.sessions


def test_a_deleted_session_cancels_its_running_tools():
    app = ReferenceServer(countdown_delay=0.5)
    call = _rpc("long", "tools/call", name="countdown", arguments={"count": 1000, "size": 10})
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        session = _open_session(client, url)
        headers = {"accept": BOTH, "mcp-session-id": session}
        with client.stream("POST", url, json=call, headers=headers) as answer:
            next(line for line in answer.iter_lines() if line.startswith("id: "))
        (task,) = app.tasks
        assert client.delete(url, headers={"mcp-session-id": session}).status_code == 200
        _wait_for(lambda: not app.tasks)  # the task's done callbacks run a loop step after it ends
        assert task.cancelled() and app.log.stored == 0


def test_past_the_task_cap_a_streaming_call_is_refused_server_busy():
    app = ReferenceServer(max_tasks=1, countdown_delay=0.5)
    long = _rpc("long", "tools/call", name="countdown", arguments={"count": 1000, "size": 10})
    short = _rpc("short", "tools/call", name="countdown", arguments={"count": 0, "size": 10})
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        session = _open_session(client, url)
        headers = {"accept": BOTH, "mcp-session-id": session}
        with client.stream("POST", url, json=long, headers=headers) as answer:
            next(line for line in answer.iter_lines() if line.startswith("id: "))
            busy = client.post(url, json=short, headers=headers)
            assert busy.status_code == 200 and busy.headers["mcp-session-id"] == session
            assert busy.json()["id"] == "short" and busy.json()["error"]["code"] == -32000
            assert "server busy" in busy.json()["error"]["message"].lower()
            assert len(app.tasks) == 1
            (task,) = app.tasks
            task.get_loop().call_soon_threadsafe(task.cancel)
            _wait_for(lambda: not app.tasks)
        served = client.post(url, json=short, headers=headers)
        assert _events(served.text)[-1][1]["result"]["content"][0]["text"] == filler(10)


# -- the event store --------------------------------------------------------------------


def _stored(app: ReferenceServer) -> int:
    return sum(stream.size for stream in app.log.streams.values())


def test_the_store_drops_finished_streams_before_a_running_one():
    """Its comment always said so; the code dropped the oldest stream, running or not."""
    app = ReferenceServer()
    session = app._new_session(_rpc(0, "initialize"))
    running_stream = app._open_stream(session)
    for _ in range(server_module.MAX_STREAMS):
        app.log.finish(app._open_stream(session))
    assert running_stream in session.streams.values()
    assert len(session.streams) == server_module.MAX_STREAMS


def test_the_store_drops_the_oldest_running_stream_only_when_all_run():
    """It leaves the session's index (a resumption of it is refused) but not the log: its
    reader is not cut (in stateless mode every client shares one session and its cap)."""
    app = ReferenceServer(max_streams=2)
    session = app._new_session(_rpc(0, "initialize"))
    first, second, third = (app._open_stream(session) for _ in range(3))
    assert list(session.streams.values()) == [second, third] and first.key in app.log


def test_the_store_stays_within_its_byte_budget_dropping_finished_streams_first():
    """Many large answers: the oldest finished ones go (a resumption of one is refused 409)
    while a running stream keeps its events; the bytes counted are the bytes kept."""
    app = ReferenceServer(max_store_bytes=300_000)
    session = app._new_session(_rpc(0, "initialize"))
    live = app._open_stream(session)
    app._emit(session, live, {"jsonrpc": "2.0", "method": "notifications/progress"})
    answers = []
    for n in range(10):
        stream = app._open_stream(session)
        app._emit(session, stream, {"jsonrpc": "2.0", "id": n, "result": {"text": "x" * 100_000}})
        app.log.finish(stream)
        answers.append(stream)
    assert app.log.stored == _stored(app) <= 300_000
    assert live.key in app.log and len(live.events) == 2 and live.evicted == 0
    assert answers[-1].key in app.log and answers[0].key not in app.log
    assert answers[0] not in session.streams.values()


def test_over_budget_with_every_stream_running_the_oldest_events_go_and_a_reader_is_cut():
    app = ReferenceServer(max_store_bytes=250_000, store_size=100)
    session = app._new_session(_rpc(0, "initialize"))
    old, new = app._open_stream(session), app._open_stream(session)
    note = {"jsonrpc": "2.0", "method": "n", "params": {"text": "x" * 50_000}}

    async def main() -> None:
        reader = app._follow(old, 0)
        await reader.__anext__()  # the priming event sent; the reader then lags
        for _ in range(3):
            app._emit(session, old, note)
        for _ in range(3):
            app._emit(session, new, note)
        assert app.log.stored == _stored(app) <= 250_000
        assert old.evicted > 1 and new.evicted == 0  # the oldest running stream paid
        with pytest.raises(ConnectionAbortedError, match="outran"):
            async for _ in reader:
                pass

    asyncio.run(main())


def test_an_event_larger_than_the_budget_is_still_delivered():
    app = ReferenceServer(max_store_bytes=1000)
    session = app._new_session(_rpc(0, "initialize"))
    stream = app._open_stream(session)
    app._emit(session, stream, {"jsonrpc": "2.0", "id": 1, "result": {"text": "x" * 5000}})
    assert b'"id": 1' in stream.events[-1][1] and app.log.stored == _stored(app)


def test_the_get_stream_is_a_bounded_store_stream_and_a_lagging_reader_is_cut():
    """The standalone GET stream held its messages in a queue of 1024 that made the producer
    fail when full; now it is a stream of the store: store_size events, the oldest dropped,
    and its reader, once outrun, cut (never a silent gap)."""
    app = ReferenceServer(store_size=4, keepalive=0)
    session = app._new_session(_rpc(0, "initialize"))
    release = None
    sent: list[dict] = []

    async def receive() -> dict:
        await asyncio.Event().wait()  # the client neither sends nor leaves
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)
        if message.get("body"):
            await release.wait()  # the client reads nothing after the priming event

    async def main() -> None:
        nonlocal release
        release = asyncio.Event()
        scope = {
            "type": "http",
            "method": "GET",
            "path": app.path,
            "headers": [
                (b"host", b"127.0.0.1"),
                (b"accept", SSE.encode()),
                (b"mcp-session-id", session.ident.encode()),
            ],
        }
        serving = asyncio.ensure_future(app(scope, receive, send))
        await asyncio.sleep(0.05)
        (listener,) = session.listeners
        for n in range(50):
            app._emit(
                session, listener, {"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": n}}
            )
        assert len(listener.events) == 4 and listener.evicted > 1
        release.set()
        await asyncio.wait_for(serving, DEADLINE)  # the reader is cut: the app returns
        assert not any(m.get("more_body") is False for m in sent)  # cut, never ended cleanly
        assert session.listeners == [] and listener.done

    asyncio.run(main())


# -- defects: each answered with a JSON-RPC error, never a 500 ------------------------------


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"name": "countdown", "arguments": {"count": "many"}}, -32602),
        ({"name": "countdown", "arguments": {"delay": "slow"}}, -32602),
        ({"name": "countdown", "arguments": {"count": True}}, -32602),
        ({"name": "countdown", "arguments": {"size": 1.5}}, -32602),
        ({"name": "big", "arguments": {"size": [1]}}, -32602),
        ({"name": "structured", "arguments": {"n": "one"}}, -32602),
        ({"name": "echo", "arguments": ["text"]}, -32602),
        ({"name": "echo", "arguments": "text"}, -32602),
    ],
)
def test_a_bad_tool_argument_is_invalid_params_never_a_500(arguments, code):
    app = ReferenceServer()
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        session = _open_session(client, url)
        answer = client.post(
            url, json=_rpc(7, "tools/call", **arguments), headers={"accept": BOTH, "mcp-session-id": session}
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["id"] == 7 and answer.json()["error"]["code"] == code
    assert arguments["name"] in answer.json()["error"]["message"]
    assert app.tasks == set() and list(app.errors) == []


def test_a_number_too_large_for_a_float_is_a_parse_error():
    """1e400 is a JSON number that Python's json reads as infinity (int() of it raised a
    500); orjson, the parser of the inbound ladder, refuses a number past a double's range
    (RFC 8259 section 6 lets a parser limit it): 400, -32700, as the gateway answers."""
    app = ReferenceServer(json_response=True)
    body = b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", '
    body += b'"params": {"name": "countdown", "arguments": {"count": 1e400}}}'
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        headers = {
            "accept": BOTH,
            "mcp-session-id": _open_session(client, url),
            "content-type": "application/json",
        }
        answer = client.post(url, content=body, headers=headers)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == -32700


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (json.dumps(_rpc([1], "tools/call", name="echo", arguments={})), 400, -32600),
        (json.dumps(_rpc({"a": 1}, "ping")), 400, -32600),
        (json.dumps(_rpc(True, "ping")), 400, -32600),
        (json.dumps({"jsonrpc": "2.0", "id": [1], "result": {}}), 400, -32600),
        (
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "countdown", '
            '"arguments": {"count": Infinity}}}',
            400,
            -32700,
        ),
        ('{"jsonrpc": "2.0", "id": NaN, "method": "ping"}', 400, -32700),
        ("[" * 100_000, 400, -32700),  # deeper than the parser's recursion limit
    ],
)
def test_an_id_that_is_not_one_or_non_standard_json_is_refused_never_a_500(body, status, code):
    """JSON-RPC 2.0: an id is a string, a number or null, so a list id is an Invalid Request
    (-32600, answered with id null), not invalid params; NaN/Infinity are not JSON."""
    app = ReferenceServer()
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        session = _open_session(client, url)
        headers = {"accept": BOTH, "mcp-session-id": session, "content-type": "application/json"}
        answer = client.post(url, content=body.encode(), headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code and answer.json()["id"] is None


def test_stateless_initializes_each_answer_their_own_version_and_share_none():
    """Each initialize wrote its version into the one scope all stateless clients share;
    the version is negotiated per request now."""
    app = ReferenceServer(stateless=True)
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client:
        url = base + app.path
        versions = ["1999-01-01", "2025-11-25", "2025-03-26", "2025-06-18"]  # the last one differs
        answered = [_events(_initialize(client, url, v).text)[-1][1]["result"] for v in versions]
    negotiated = ["2025-11-25", "2025-11-25", "2025-03-26", "2025-06-18"]
    assert [each["protocolVersion"] for each in answered] == negotiated
    assert app.stateless.version == "2025-11-25"  # the server's own, untouched


# -- producers end their stream on failure (held since issue 20; tested here for ask) ------


def test_a_failing_ask_answers_with_an_error_and_ends_every_reader(monkeypatch):
    """ask fails after the client answered its question: the call's reader and a GET
    resuming the same stream both end with -32603; the failure is kept."""

    def broken_text(text: str) -> dict:
        raise RuntimeError("ask broke")

    monkeypatch.setattr(server_module, "text_result", broken_text)
    app = ReferenceServer(keepalive=0.2)
    call = _rpc("a1", "tools/call", name="ask", arguments={"question": "why?"})
    with running(app) as base, httpx.Client(timeout=DEADLINE) as client, ThreadPoolExecutor(1) as pool:
        url = base + app.path
        session = _open_session(client, url)
        headers = {"accept": BOTH, "mcp-session-id": session}
        with client.stream("POST", url, json=call, headers=headers) as answer:
            lines = answer.iter_lines()
            priming = next(line for line in lines if line.startswith("id: "))[4:]
            follower = pool.submit(_follow, url, session, priming)
            asked = json.loads(next(line for line in lines if line.startswith("data: {"))[6:])
            assert asked["method"] == "sampling/createMessage"
            reply = {"jsonrpc": "2.0", "id": asked["id"], "result": {"role": "assistant"}}
            assert client.post(url, json=reply, headers=headers).status_code == 202
            posted = "\n".join(lines)
        followed = follower.result(timeout=DEADLINE)
    for body in (posted, followed):
        assert _events(body)[-1][1] == {
            "jsonrpc": "2.0",
            "id": "a1",
            "error": {"code": -32603, "message": "Internal error: the tool failed"},
        }
    assert [str(error) for error in app.errors] == ["ask broke"] and app.tasks == set()


# -- memory, measured in the server's own process ---------------------------------------------

SLACK = 64 << 20  # what a bound may be exceeded by: interpreter, buffers, one answer in flight


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak memory is read from /proc (Linux)")
def test_peak_memory_stays_within_the_bounds_plus_a_constant_under_hostile_clients():
    """ssewire serve in its own process: a 1 GiB chunked body, a flood of initializes, then
    answers far past the store's byte budget. Its peak memory (VmHWM) grows by less than
    the bound plus SLACK each time; memory, not speed, so no time is asserted."""
    from tests.support.hostile_clients import (
        MIB,
        big_answers,
        endless_body,
        initialize_flood,
        peak_memory,
        serve,
    )

    options = ("--max-body", str(MIB), "--max-sessions", "64", "--max-store-bytes", str(16 * MIB))
    with serve(*options) as served, httpx.Client(timeout=DEADLINE) as client:
        early = _open_session(client, served.url)
        baseline = peak_memory(served.pid)
        body = endless_body(served.port, 1024 * MIB)
        after_body = peak_memory(served.pid)
        flood = initialize_flood(served.url, 300)
        after_flood = peak_memory(served.pid)
        answers = big_answers(served.url, 24, 2 * MIB)  # 48 MiB, three budgets
        after_answers = peak_memory(served.pid)
        evicted = _ping(client, served.url, early)
    assert body.status == 413 and body.sent < 64 * MIB
    assert after_body - baseline < MIB + SLACK
    assert flood == {200: 300} and evicted == 404
    assert after_flood - baseline < SLACK
    assert answers == {200: 24}
    assert after_answers - baseline < 16 * MIB + SLACK, (after_answers - baseline) / MIB
