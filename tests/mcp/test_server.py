"""The reference server's own contracts: faults are a typed set checked at start-up, the
tasks it spawns are owned (failures kept and logged, cancelled and awaited at shutdown),
and every stream it opens ends, so no reader or resuming GET waits on a dead producer.

Servers run on 127.0.0.1 (uvicorn threads started here); every wait has a deadline.
"""

from __future__ import annotations

import ast
import asyncio
import gc
import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from ssewire._errors import InputError
from ssewire.mcp.live import server as server_module
from ssewire.mcp.live.faults import FAULTS, Fault, UnknownFault
from ssewire.mcp.live.server import ReferenceServer, running

BOTH = "application/json, text/event-stream"
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


# -- a producer that fails ------------------------------------------------------------


def test_a_failing_producer_answers_with_an_error_and_ends_every_reader(monkeypatch, caplog):
    """countdown's result cannot be made: the POST reader and a GET resuming the same stream
    (waiting before the failure) both end, with -32603 for the call; the failure is kept."""

    def broken_filler(size: int) -> str:
        raise RuntimeError("the tool broke")

    monkeypatch.setattr(server_module, "_filler", broken_filler)
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
    monkeypatch.setattr(server_module, "_filler", lambda size: 1 / 0)
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
