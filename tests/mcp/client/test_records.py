"""A client's books: one record per request in flight, in one table (``Client._requests``),
under its JSON-RPC id and its progress token; nothing of a request outlives it there,
whichever way its call ends."""

from __future__ import annotations

import asyncio

import pytest

from ssewire.mcp.client import Client, RequestTimeout, RPCError
from ssewire.mcp.transport.serving import running
from tests.support.resets import reference_server as server


def response(ident):
    return {"jsonrpc": "2.0", "id": ident, "result": {}}


def progress(token, value):
    return {"progressToken": token, "progress": value}


def offline(main):
    """Run ``main(client)`` with a client that is never connected (nothing is sent)."""

    async def run():
        client = Client("http://127.0.0.1:9/mcp")
        try:
            return await main(client)
        finally:
            await client.http.aclose()

    return asyncio.run(run())


def test_a_request_is_one_record_under_its_id_and_its_token_until_it_ends():
    seen = []

    async def main(client):
        with client._booked(5, seen.append) as record:
            assert client._requests == {5: record, "ssewire-p5": record}
            assert client.position(5) is None  # before any event id
            record.cursor = "s1-3"
            assert client.position(5) == "s1-3" and client.position("ssewire-p5") is None
            assert client._progressed(progress("ssewire-p5", 1))
            client._route(response(5))
            assert (await record.future)["id"] == 5
        assert client._requests == {} and client.position(5) is None
        assert client._progressed(progress("ssewire-p5", 2))  # ours, its call ended: dropped
        return record

    record = offline(main)
    assert seen == [progress("ssewire-p5", 1)] and len(record.times) == 1


def test_a_request_without_progress_has_no_token():
    async def main(client):
        with client._booked(7) as record:
            assert client._requests == {7: record} and record.token is None
            assert client._progressed(progress("ssewire-p7", 1))  # late: nobody asked for it
        return client.statistics()["late_progress"]

    assert offline(main) == 1


def test_a_reissued_request_moves_to_its_new_id_and_keeps_its_token():
    seen = []

    async def main(client):
        with client._booked(5, seen.append) as record:
            record.cursor = "s1-3"
            client._reissued(record, 6)
            assert client._requests == {6: record, "ssewire-p5": record}
            assert record.cursor is None and client.position(5) is None
            assert client._progressed(progress("ssewire-p5", 1))  # the token sent with it still routes
            client._route(response(5))  # the broken id: no longer listened to
            client._route(response("ssewire-p5"))  # a token is not an id
            assert not record.future.done()
            client._route(response(6))
            assert record.future.done()
        return client._requests

    assert offline(main) == {} and seen == [progress("ssewire-p5", 1)]


def test_books_end_with_the_block_however_it_ends():
    async def main(client):
        with pytest.raises(ValueError), client._booked(1, print):
            raise ValueError
        task = asyncio.ensure_future(_hold(client, 2))
        await asyncio.sleep(0)
        assert set(client._requests) == {2, "ssewire-p2"}
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return client._requests

    assert offline(main) == {}


async def _hold(client, ident):
    with client._booked(ident, print) as record:
        await record.future


def test_the_books_are_empty_after_every_kind_of_call():
    """Answered, with progress, concurrent, refused, timed out, cancelled, after a
    re-initialization: each call's record is gone when it ends."""

    async def main(url, app):
        books = []
        async with Client(url, profile="2025-11-25", listen=False) as client:
            books.append(len(client._requests))  # the handshake's
            await asyncio.gather(
                client.call_tool("countdown", {"count": 3, "size": 10}, on_progress=lambda p: None),
                client.call_tool("countdown", {"count": 2, "size": 10}),
                client.call_tool("echo", {"text": "a"}),
            )
            books.append(len(client._requests))
            with pytest.raises(RPCError):
                await client.request("no/such/method")
            books.append(len(client._requests))
            with pytest.raises(RequestTimeout):
                await client.call_tool(
                    "countdown", {"count": 50, "delay": 0.05, "size": 0}, on_progress=print, timeout=0.2
                )
            books.append(len(client._requests))
            call = asyncio.ensure_future(
                client.call_tool("countdown", {"count": 50, "delay": 0.05, "size": 0}, on_progress=print)
            )
            await asyncio.sleep(0.1)
            books.append(len(client._requests))  # in flight: one record, under its id and its token
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
            books.append(len(client._requests))
            for session in list(app.sessions):
                app.sessions.pop(session)  # the server forgot it: the next call re-initializes
            await client.call_tool("echo", {"text": "b"}, on_progress=lambda p: None)
            books.append(len(client._requests))
            return books, client.statistics()["reinitializations"]

    app = server()
    with running(app) as base:
        books, reinitializations = asyncio.run(main(base + "/mcp", app))
    assert books == [0, 0, 0, 0, 2, 0, 0] and reinitializations == 1
