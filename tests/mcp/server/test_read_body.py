"""read_body under a deadline and a budget: a stalled or trickled body is 408 by the
deadline, its bytes are held by the reservation as they come (refused before the rest is
read when they do not fit), a body with a Content-Length is read into one allocation, and
a Content-Length that lies is a 400, never a crash."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from ssewire.mcp.protocol.codes import INVALID_REQUEST
from ssewire.mcp.server.asgi import (
    UNRESERVED_PREALLOCATION,
    BodyMismatch,
    BodyTimeout,
    BodyTooLarge,
    message_of,
    read_body,
)
from ssewire.mcp.server.budget import BudgetFull, ByteBudget, NeverFits

Receive = Callable[[], Awaitable[dict[str, Any]]]


def feeder(chunks: list[bytes], *, end: bool = True, calls: list[int] | None = None) -> Receive:
    """An ASGI receive that gives ``chunks`` (the last with more_body False when ``end``),
    then stalls for ever; ``calls`` counts the calls."""
    pieces = list(chunks)

    async def receive() -> dict[str, Any]:
        if calls is not None:
            calls.append(1)
        if not pieces:
            await asyncio.Event().wait()
        chunk = pieces.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(pieces) or not end}

    return receive


def run(coroutine: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 10))  # a hang fails, it never blocks the suite


def test_without_a_deadline_or_a_budget_it_reads_as_before():
    assert run(read_body(feeder([b'{"a"', b":1}"]), {}, 100)) == b'{"a":1}'
    with pytest.raises(BodyTooLarge):
        run(read_body(feeder([b"x" * 60, b"x" * 60]), {}, 100))


def test_a_body_in_one_piece_is_that_piece_not_a_copy():
    chunk = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    body = run(read_body(feeder([chunk]), {"content-length": str(len(chunk))}, 1000))
    assert body is chunk


def test_a_stalled_body_is_408_at_its_deadline_and_the_connection_closes():
    started = time.monotonic()
    with pytest.raises(BodyTimeout) as refused:
        run(read_body(feeder([b"{"], end=False), {}, 100, deadline=0.3))
    took = time.monotonic() - started
    assert 0.3 <= took < 0.8
    refusal = refused.value.refusal
    assert (refusal.status, refusal.code) == (408, INVALID_REQUEST)
    assert ("connection", "close") in refusal.headers


def test_the_deadline_is_for_the_whole_body_not_each_piece():
    async def trickle() -> dict[str, Any]:
        await asyncio.sleep(0.05)  # each piece well within the deadline
        return {"type": "http.request", "body": b"x", "more_body": True}

    started = time.monotonic()
    with pytest.raises(BodyTimeout):
        run(read_body(trickle, {}, 10_000, deadline=0.4))
    assert 0.4 <= time.monotonic() - started < 0.9


def test_a_body_within_its_deadline_is_read():
    assert run(read_body(feeder([b"ab", b"cd"]), {}, 100, deadline=5)) == bytearray(b"abcd")


def test_the_reservation_grows_with_each_piece_before_it_is_kept():
    budget = ByteBudget(1000)
    seen: list[int] = []
    pieces = [b"a" * 10, b"b" * 20, b"c" * 30]

    async def receive() -> dict[str, Any]:
        seen.append(budget.in_use)
        chunk = pieces.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(pieces)}

    with budget.reserve(0) as held:
        body = run(read_body(receive, {}, 1000, budget=held))
        assert body == b"a" * 10 + b"b" * 20 + b"c" * 30
        assert seen == [0, 10, 30] and held.size == 60 and budget.in_use == 60
    assert budget.in_use == 0 and budget.peak == 60


def test_a_body_over_the_budget_is_refused_before_it_is_all_read():
    budget = ByteBudget(45)
    others = budget.reserve(20)
    calls: list[int] = []
    with pytest.raises(BudgetFull) as refused, budget.reserve(0) as held:
        run(read_body(feeder([b"x" * 10] * 10, calls=calls), {}, 1000, budget=held))
    assert len(calls) == 3  # the third piece does not fit: the other seven are never read
    assert budget.in_use == 20 and budget.refused == 1
    assert refused.value.refusal.status == 503  # it would fit once the others are done
    others.release()
    with pytest.raises(NeverFits) as never, budget.reserve(0) as held:
        run(read_body(feeder([b"x" * 10] * 10, calls=calls), {}, 1000, budget=held))
    assert never.value.refusal.status == 413  # more than the whole budget: never to be admitted


def test_a_content_length_over_the_budget_is_refused_at_its_first_piece():
    budget = ByteBudget(1000)
    calls: list[int] = []
    with pytest.raises(NeverFits), budget.reserve(0) as held:
        run(
            read_body(feeder([b"x" * 10] * 200, calls=calls), {"content-length": "2000"}, 10_000, budget=held)
        )
    assert len(calls) == 1


def test_with_a_content_length_the_body_is_one_allocation_held_by_the_reservation():
    size, piece = 4 << 20, 64 << 10
    source = bytes(range(256)) * (size // 256)
    budget = ByteBudget(size)
    seen: list[int] = []
    offsets = iter(range(0, size, piece))

    async def receive() -> dict[str, Any]:
        seen.append(budget.in_use)
        at = next(offsets)
        return {"type": "http.request", "body": source[at : at + piece], "more_body": at + piece < size}

    async def read() -> tuple[bytes | bytearray, int]:
        tracemalloc.start()  # the peak is taken inside: asyncio.run's teardown has its own
        try:
            with budget.reserve(0) as held:
                body = await read_body(receive, {"content-length": str(size)}, size, budget=held)
                assert budget.in_use == size
                return body, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    body, peak = run(read())
    assert isinstance(body, bytearray) and body == source
    assert seen[0] == 0 and set(seen[1:]) == {size}  # all of it reserved at the first piece
    assert peak < size * 1.25  # pieces and a join would take twice the body
    assert message_of(bytearray(b'{"jsonrpc":"2.0","id":1,"method":"ping"}'))["method"] == "ping"


def test_without_a_reservation_a_large_content_length_is_not_allocated_ahead():
    receive = feeder([b"x" * 10, b"y" * 10], end=False)

    async def then_gone() -> dict[str, Any]:
        try:
            return await asyncio.wait_for(receive(), 0.05)
        except asyncio.TimeoutError:
            return {"type": "http.disconnect"}

    async def read() -> tuple[bytes | bytearray, int]:
        tracemalloc.start()
        try:
            body = await read_body(then_gone, {"content-length": str(256 << 20)}, 1 << 30)
            return body, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    body, peak = run(read())
    assert body == b"x" * 10 + b"y" * 10  # a disconnect: what was read
    assert UNRESERVED_PREALLOCATION <= peak < UNRESERVED_PREALLOCATION + (256 << 10)


def test_a_content_length_over_the_limit_is_refused_before_a_byte_is_read():
    calls: list[int] = []
    with pytest.raises(BodyTooLarge):
        run(read_body(feeder([b"x"], calls=calls), {"content-length": "101"}, 100))
    assert calls == []


def test_a_body_longer_than_its_content_length_is_400_before_the_rest_is_read():
    calls: list[int] = []
    for declared in ("5", "15"):
        calls.clear()
        with pytest.raises(BodyMismatch) as refused:
            run(
                read_body(
                    feeder([b"x" * 10, b"y" * 10, b"z" * 10], calls=calls), {"content-length": declared}, 100
                )
            )
        assert len(calls) == int(declared) // 10 + 1
        assert (refused.value.refusal.status, refused.value.refusal.code) == (400, INVALID_REQUEST)
        assert "longer" in refused.value.refusal.text
        assert ("connection", "close") in refused.value.refusal.headers


@pytest.mark.parametrize("pieces", [[b"x" * 10], [b"x" * 10, b"y" * 10], []])
def test_a_body_that_ends_short_of_its_content_length_is_400(pieces):
    budget = ByteBudget(1000)
    with pytest.raises(BodyMismatch) as refused, budget.reserve(0) as held:
        run(read_body(feeder([*pieces, b""]), {"content-length": "50"}, 100, budget=held))
    assert "shorter" in refused.value.refusal.text
    assert budget.in_use == 0


def test_a_disconnect_before_the_content_length_gives_what_was_read_and_its_reservation_shrinks():
    budget = ByteBudget(1000)
    pieces = [{"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.disconnect"}]

    async def receive() -> dict[str, Any]:
        return pieces.pop(0)

    with budget.reserve(0) as held:
        body = run(read_body(receive, {"content-length": "500"}, 1000, budget=held))
        assert body == b"ab" and held.size == 2 and budget.in_use == 2
