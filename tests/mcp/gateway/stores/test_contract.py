"""One contract for every store of the gateway: the memory store and the Redis store (a real
redis-server the tests start) give the same answers to the same calls, with the typed
records of ``stores/base.py`` crossing the boundary."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from ssewire.mcp.gateway.stores import (
    CallRecord,
    Gap,
    MemoryStore,
    Position,
    SessionRecord,
    Store,
    StreamState,
)
from tests.support.redis_server import redis_server

MAX_EVENTS = 4
WAIT = 5.0  # seconds any one store call may take here


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


@pytest.fixture(params=["memory", "redis"])
def store_factory(request) -> Callable[[], contextlib.AbstractAsyncContextManager[Store]]:
    @contextlib.asynccontextmanager
    async def made() -> AsyncIterator[Store]:
        if request.param == "memory":
            store: Store = MemoryStore(max_events=MAX_EVENTS)
        else:
            from ssewire.mcp.gateway.stores.redis import RedisStore

            url = request.getfixturevalue("redis_url")
            store = RedisStore.from_url(url, prefix=f"test:{secrets.token_hex(4)}:", max_events=MAX_EVENTS)
        try:
            yield store
        finally:
            await store.aclose()

    return made


def run(factory, scenario: Callable[[Store], Awaitable[None]]) -> None:
    async def main() -> None:
        async with factory() as store:
            await asyncio.wait_for(scenario(store), 4 * WAIT)

    asyncio.run(main())


async def drained(store: Store, session: str, stream: int, after: int = 0) -> list[tuple[str, bytes]]:
    """Every event of a finished stream after ``after``: (id, data)."""

    async def read() -> list[tuple[str, bytes]]:
        return [(e.event_id, e.data) async for batch in store.follow(session, stream, after) for e in batch]

    return await asyncio.wait_for(read(), WAIT)


def test_session_records_are_created_loaded_updated_and_dropped(store_factory):
    async def scenario(store: Store) -> None:
        record = SessionRecord("s1", "2025-11-25", "up-1", {"sampling": {}}, {"name": "c", "version": "1"})
        assert await store.load("s1") is None
        await store.create(record)
        assert await store.load("s1") == record
        record.upstream = "up-2"
        await store.update(record)
        assert (await store.load("s1")).upstream == "up-2"
        await store.update(SessionRecord("never-created", "2025-11-25", None))
        assert await store.load("never-created") is None  # update creates nothing
        await store.drop("s1")
        assert await store.load("s1") is None

    run(store_factory, scenario)


def test_streams_are_numbered_per_session_and_say_what_they_answer(store_factory):
    async def scenario(store: Store) -> None:
        call = CallRecord(7, "tools/call", "tok")
        assert await store.open_stream("s", call) == 1
        assert await store.open_stream("s") == 2
        assert await store.open_stream("other") == 1
        assert await store.state("s", 1) == StreamState(call, False, 1, 0, None)
        assert (await store.state("s", 2)).call is None
        assert await store.state("s", 9) is None

    run(store_factory, scenario)


def test_events_are_followed_in_order_with_their_ids_until_the_stream_ends(store_factory):
    async def scenario(store: Store) -> None:
        stream = await store.open_stream("s")
        await store.append("s", stream, [(b"", 1.0), (b'{"a":1}', 2.0)])
        await store.append("s", stream, [(b'{"b":2}', 3.0)], final=True)
        assert await drained(store, "s", stream) == [("1-1", b""), ("1-2", b'{"a":1}'), ("1-3", b'{"b":2}')]
        assert await drained(store, "s", stream, after=2) == [("1-3", b'{"b":2}')]
        state = await store.state("s", stream)
        assert state.done and state.next == 4 and state.holds(2) and not state.holds(4)

    run(store_factory, scenario)


def test_a_follower_wakes_for_events_appended_later_and_a_finish_ends_it(store_factory):
    async def scenario(store: Store) -> None:
        stream = await store.open_stream("s")
        await store.append("s", stream, [(b"1", 0.0)])
        got: list[bytes] = []

        async def follow() -> None:
            async for batch in store.follow("s", stream, 0):
                got.extend(e.data for e in batch)

        reader = asyncio.ensure_future(follow())
        await asyncio.sleep(0.05)
        await store.append("s", stream, [(b"2", 0.0)])
        await store.finish("s", stream)
        await asyncio.wait_for(reader, WAIT)
        assert got == [b"1", b"2"] and (await store.state("s", stream)).done

    run(store_factory, scenario)


def test_the_position_is_stored_with_the_events_it_covers(store_factory):
    async def scenario(store: Store) -> None:
        stream = await store.open_stream("s", CallRecord("c", "tools/call"))
        assert (await store.state("s", stream)).position is None
        await store.append("s", stream, [(b"p", 0.0)], Position(42, "ev-9", 3))
        assert (await store.state("s", stream)).position == Position(42, "ev-9", 3)

    run(store_factory, scenario)


def test_a_stream_keeps_its_newest_events_and_a_reader_from_before_them_gets_a_gap(store_factory):
    async def scenario(store: Store) -> None:
        stream = await store.open_stream("s")
        await store.append("s", stream, [(bytes([n]), 0.0) for n in range(1, 7)], final=True)
        state = await store.state("s", stream)
        assert state.evicted == 2 and state.next == 7 and not state.holds(1) and state.holds(2)
        assert [i for i, _ in await drained(store, "s", stream, after=2)] == ["1-3", "1-4", "1-5", "1-6"]
        with pytest.raises(Gap):
            await drained(store, "s", stream, after=0)

    run(store_factory, scenario)


def test_a_stream_never_reached_or_of_a_dropped_session_is_a_gap(store_factory):
    async def scenario(store: Store) -> None:
        await store.create(SessionRecord("s", "2025-11-25", None))
        stream = await store.open_stream("s")
        await store.append("s", stream, [(b"1", 0.0)], final=True)
        with pytest.raises(Gap):
            await drained(store, "s", stream, after=5)
        await store.drop("s")
        assert await store.state("s", stream) is None
        with pytest.raises(Gap):
            await drained(store, "s", stream)

    run(store_factory, scenario)


def test_an_answer_to_a_servers_request_reaches_whoever_expects_it(store_factory):
    async def scenario(store: Store) -> None:
        waiting = asyncio.ensure_future(store.expect("s", "gw-1", WAIT))
        await asyncio.sleep(0.05)
        await store.answered("s", {"jsonrpc": "2.0", "id": "gw-1", "result": {"ok": True}})
        assert (await waiting)["result"] == {"ok": True}
        assert await store.expect("s", "gw-2", 0.1) is None  # nobody answered: None, in time

    run(store_factory, scenario)


def test_an_answer_posted_once_its_wait_is_registered_is_taken(store_factory):
    """``registered`` says when an answer would be taken: the gateway sends the server's
    request down only then (no sleep: a client may answer at once)."""

    async def scenario(store: Store) -> None:
        registered = asyncio.get_running_loop().create_future()
        waiting = asyncio.ensure_future(store.expect("s", "gw-1", WAIT, registered))
        await asyncio.wait_for(registered, WAIT)
        assert await store.answered("s", {"jsonrpc": "2.0", "id": "gw-1", "result": {"ok": 1}})
        assert (await waiting)["result"] == {"ok": 1}

    run(store_factory, scenario)


def test_one_process_never_adopts_a_stream_it_writes(store_factory):
    async def scenario(store: Store) -> None:
        stream = await store.open_stream("s")
        assert await store.adopt("s", stream) is None  # memory: never; Redis: its lease holds

    run(store_factory, scenario)


def test_what_a_redis_store_holds_is_read_as_untrusted(redis_url):
    """A store is a peer too: a record or a stream of the wrong shape reads as absent, never
    as a crash in the request that met it."""
    from ssewire.mcp.gateway.stores.redis import RedisStore

    async def main() -> None:
        store = RedisStore.from_url(redis_url, prefix=f"test:{secrets.token_hex(4)}:")
        try:
            await store.redis.set(store._key("s", "bad"), b"not json")
            await store.redis.set(store._key("s", "shape"), b'{"ident": 1}')
            await store.redis.hset(store._key("m", "bad", 1), mapping={"next": "x", "call": "[]"})
            await store.redis.hset(store._key("m", "odd", 1), mapping={"next": "2", "call": '{"method": 5}'})
            assert await store.load("bad") is None and await store.load("shape") is None
            assert await store.state("bad", 1) is None
            odd = await store.state("odd", 1)
            assert odd is not None and odd.call is None and odd.next == 2
        finally:
            await store.aclose()

    asyncio.run(main())


def test_a_failed_stream_ends_for_its_followers_with_the_error_as_its_last_event(store_factory):
    async def scenario(store: Store) -> None:
        stream = await store.open_stream("s", CallRecord(3, "tools/call"))
        await store.append("s", stream, [(b"1", 0.0)])
        reader = asyncio.ensure_future(drained(store, "s", stream))
        await asyncio.sleep(0.05)
        await store.fail("s", stream, b'{"error":1}')
        assert await reader == [("1-1", b"1"), ("1-2", b'{"error":1}')]  # its id: the next one
        await asyncio.sleep(0.1)  # (Redis: stored in the background, when it takes it)
        state = await store.state("s", stream)
        assert state.done and state.next == 3
        assert await drained(store, "s", stream, after=1) == [("1-2", b'{"error":1}')]

    run(store_factory, scenario)


def test_an_answer_no_one_expects_is_refused_and_one_expected_is_taken_once(store_factory):
    async def scenario(store: Store) -> None:
        assert await store.answered("s", {"jsonrpc": "2.0", "id": "gw-9", "result": {}}) is False
        assert await store.answered("s", {"jsonrpc": "2.0", "id": 5, "result": {}}) is False
        waiting = asyncio.ensure_future(store.expect("s", "gw-1", WAIT))
        await asyncio.sleep(0.05)
        assert await store.answered("s", {"jsonrpc": "2.0", "id": "gw-1", "result": {"n": 1}}) is True
        assert await store.answered("s", {"jsonrpc": "2.0", "id": "gw-1", "result": {"n": 2}}) is False
        assert (await waiting)["result"] == {"n": 1}
        assert await store.expect("s", "gw-9", 0.1) is None  # the refused one was kept nowhere

    run(store_factory, scenario)


def test_a_cancellation_reaches_the_listeners_of_its_session_until_they_stop(store_factory):
    async def scenario(store: Store) -> None:
        heard: list[tuple[object, object]] = []
        others: list[tuple[object, object]] = []
        stop = store.listen_cancels("s", lambda ident, reason: heard.append((ident, reason)))
        stop_other = store.listen_cancels("t", lambda ident, reason: others.append((ident, reason)))
        await asyncio.sleep(0.2)  # (Redis: subscribed)
        await store.cancel("s", 7, "enough")
        for _ in range(50):
            if heard:
                break
            await asyncio.sleep(0.05)
        assert heard == [(7, "enough")] and others == []
        stop()
        await store.cancel("s", 8)
        await asyncio.sleep(0.2)
        assert heard == [(7, "enough")]
        stop_other()

    run(store_factory, scenario)


def test_a_store_that_answers_pings(store_factory):
    async def scenario(store: Store) -> None:
        await asyncio.wait_for(store.ping(), WAIT)  # raises StoreFailed when it does not answer

    run(store_factory, scenario)


def test_a_released_stream_is_adopted_at_once_by_another_replica_where_it_stands(redis_url):
    """A draining replica lets its stream go (`release`): a follower at another replica finds
    it abandoned at its next look, long before the lease would lapse, adopts it where the
    events and the position stand, and the releaser can no longer write it."""
    from ssewire.mcp.gateway.stores import Abandoned
    from ssewire.mcp.gateway.stores.redis import RedisStore

    async def main() -> None:
        prefix = f"test:{secrets.token_hex(4)}:"
        stopping = RedisStore.from_url(redis_url, prefix=prefix, lease=60.0)
        taker = RedisStore.from_url(redis_url, prefix=prefix, lease=60.0)
        try:
            stream = await stopping.open_stream("s", CallRecord("c", "tools/call", "tok"))
            await stopping.append("s", stream, [(b"one", 0.0)], Position(7, "up-3", 1))
            await stopping.append("s", stream, [], Position(7, "up-4", 1))  # the position alone
            await stopping.release("s", stream)
            loop = asyncio.get_running_loop()
            began = loop.time()
            seen: list[bytes] = []
            with pytest.raises(Abandoned) as abandoned:
                async for batch in taker.follow("s", stream, 0):
                    seen += [event.data for event in batch]
            assert loop.time() - began < 5.0  # its next look, not the 60 s lease
            assert seen == [b"one"] and abandoned.value.call == CallRecord("c", "tools/call", "tok")
            lease = await taker.adopt("s", stream)
            assert lease is not None and lease.next_seq == 2
            assert (await taker.state("s", stream)).position == Position(7, "up-4", 1)
            with pytest.raises(Gap):  # the releaser writes it no more
                await stopping.append("s", stream, [(b"late", 0.0)])
            await taker.append("s", stream, [(b"two", 0.0)], final=True)
            assert [data for _, data in await drained(taker, "s", stream)] == [b"one", b"two"]
        finally:
            await stopping.aclose()
            await taker.aclose()

    asyncio.run(main())


def test_a_rate_bucket_gives_its_burst_then_says_how_long_until_the_next_token(store_factory):
    async def scenario(store: Store) -> None:
        key = secrets.token_hex(4)
        assert [await store.take(key, 20.0, 2) for _ in range(2)] == [0.0, 0.0]
        wait = await store.take(key, 20.0, 2)
        assert 0 < wait <= 0.05 + 1e-6  # one token at 20 a second
        assert await store.take("another " + key, 20.0, 2) == 0.0  # a bucket of its own
        await asyncio.sleep(wait + 0.02)
        assert await store.take(key, 20.0, 2) == 0.0  # refilled

    run(store_factory, scenario)


def test_replicas_on_one_redis_take_from_one_bucket(redis_url):
    from ssewire.mcp.gateway.stores.redis import RedisStore

    async def scenario() -> None:
        prefix = f"test:{secrets.token_hex(4)}:"
        one, two = (
            RedisStore.from_url(redis_url, prefix=prefix),
            RedisStore.from_url(redis_url, prefix=prefix),
        )
        try:
            assert await one.take("k", 0.1, 2) == 0.0 and await two.take("k", 0.1, 2) == 0.0
            assert await one.take("k", 0.1, 2) > 9 and await two.take("k", 0.1, 2) > 9  # ~10 s each
        finally:
            await one.aclose()
            await two.aclose()

    asyncio.run(asyncio.wait_for(scenario(), 4 * WAIT))
