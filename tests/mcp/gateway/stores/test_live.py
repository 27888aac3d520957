"""A replica's own events come to its followers from memory once Redis has them (the live
tail), never read back; a follower the tail does not reach reads Redis until it does; the
tail is bounded, and has no hole."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from ssewire.mcp.gateway.stores.base import Stored, event_id
from ssewire.mcp.gateway.stores.live import LiveTail, LiveTails
from tests.support.redis_server import redis_server

WAIT = 5.0


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


def _store(url: str, **options):
    from ssewire.mcp.gateway.stores.redis import RedisStore

    return RedisStore.from_url(url, prefix=f"test:{secrets.token_hex(4)}:", **options)


def _counting_reads(store) -> list[int]:
    """Count the XREADs the store sends (each one a read back of a stream)."""
    reads: list[int] = []
    real = store.redis.xread

    async def xread(*args, **kwargs):
        reads.append(1)
        return await real(*args, **kwargs)

    store.redis.xread = xread
    return reads


async def _follow(store, stream: int, after: int, into: list) -> None:
    async for batch in store.follow("s", stream, after):
        into.extend((event.event_id, event.data) for event in batch)


async def _followed(store) -> tuple[int, list, asyncio.Future]:
    """A stream written here with one event, and a follower here that has it."""
    stream = await store.open_stream("s")
    await store.append("s", stream, [(b"a", 1.0)])
    got: list = []
    follower = asyncio.ensure_future(_follow(store, stream, 0, got))
    while not got:
        await asyncio.sleep(0.01)
    return stream, got, follower


def test_a_stream_written_here_is_followed_from_memory_as_redis_holds_it(redis_url):
    async def main():
        store = _store(redis_url)
        try:
            reads = _counting_reads(store)
            stream = await store.open_stream("s")
            got: list = []
            follower = asyncio.ensure_future(_follow(store, stream, 0, got))
            for n in range(5):  # batch by batch, the follower waiting between them
                await store.append("s", stream, [(b"m%d-%d" % (n, k), 1.0) for k in range(3)])
                await asyncio.sleep(0.01)
            await store.append("s", stream, [(b"last", 2.0)], final=True)
            await asyncio.wait_for(follower, WAIT)
            held = await store.redis.xrange(store._key("e", "s", stream))
            return reads, got, held
        finally:
            await store.aclose()

    reads, got, held = asyncio.run(main())
    assert reads == []  # nothing read back
    stored = [
        (event_id(1, int(entry.decode().partition("-")[2])), fields[b"d"]) for entry, fields in held[:-1]
    ]
    assert got == stored and len(got) == 16 and got[-1][1] == b"last"


def test_a_follower_the_tail_does_not_reach_reads_redis_then_memory(redis_url):
    async def main():
        store = _store(redis_url, max_events=1000)
        try:
            stream = await store.open_stream("s")
            await store.append("s", stream, [(b"old-%d" % n, 1.0) for n in range(100)])  # past the window
            reads = _counting_reads(store)
            got: list = []
            follower = asyncio.ensure_future(_follow(store, stream, 0, got))
            while len(got) < 100:
                await asyncio.sleep(0.01)
            caught_up = len(reads)
            for n in range(20):
                await store.append("s", stream, [(b"new-%d" % n, 1.0)])
                await asyncio.sleep(0.005)
            await store.finish("s", stream)
            await asyncio.wait_for(follower, WAIT)
            return caught_up, len(reads), got
        finally:
            await store.aclose()

    caught_up, reads, got = asyncio.run(main())
    assert caught_up >= 1  # the first 100 came from Redis
    assert reads == caught_up  # the rest from memory
    expected = [b"old-%d" % n for n in range(100)] + [b"new-%d" % n for n in range(20)]
    assert [data for _, data in got] == expected
    assert [ident for ident, _ in got] == [event_id(1, seq) for seq in range(1, 121)]


def test_a_stream_let_go_sends_its_followers_back_to_redis(redis_url):
    """Released (a draining replica): the tail goes, and the follower learns from Redis that
    the stream was abandoned, as any follower elsewhere does."""
    from ssewire.mcp.gateway.stores import Abandoned

    async def main():
        store = _store(redis_url)
        try:
            stream, got, follower = await _followed(store)
            assert store._live.tails  # followed from its tail until now
            await store.release("s", stream)
            assert not store._live.tails
            with pytest.raises(Abandoned):
                await asyncio.wait_for(follower, WAIT)
            return got
        finally:
            await store.aclose()

    assert asyncio.run(main()) == [(event_id(1, 1), b"a")]


def _stored(seq: int, size: int = 1) -> Stored:
    return Stored(event_id(1, seq), b"x" * size, 0.0)


def test_a_tail_is_bounded_in_events_and_bytes_and_keeps_the_newest():
    async def main():
        tail = LiveTail(1, max_events=4, max_bytes=10)
        tail.add(1, [_stored(n) for n in range(1, 7)])
        assert (tail.first, tail.next, len(tail.window)) == (3, 7, 4)
        assert (
            not tail.reaches(1) and tail.reaches(2) and [e.event_id for e in tail.after(4)] == ["1-5", "1-6"]
        )
        tail.add(7, [_stored(7, size=8)])  # one past the count, then 11 bytes: two go
        assert [e.event_id for e in tail.window] == ["1-5", "1-6", "1-7"] and tail.size == 10
        tail.add(8, [_stored(8, size=50)])  # larger than the bound: the newest is kept alone
        assert [e.event_id for e in tail.window] == ["1-8"] and tail.size == 50

    asyncio.run(main())


def test_a_write_the_tail_missed_starts_it_again_with_no_hole():
    async def main():
        tail = LiveTail(1)
        tail.add(1, [_stored(1), _stored(2)])
        woken = tail.changed
        tail.add(5, [_stored(5)], final=True)  # seqs 3 and 4 never reached it
        assert woken.is_set() and tail.ended
        assert (tail.first, [e.event_id for e in tail.window]) == (5, ["1-5"])
        assert not tail.reaches(2) and tail.reaches(4) and tail.after(4) == [tail.window[0]]

    asyncio.run(main())


def test_a_stream_whose_keys_vanish_ends_its_followers_here_too(redis_url):
    """Redis lost the stream (a restart, a flush) while nothing was written: the lease's
    renewal finds it gone and lets the tail go, so its follower learns it from Redis rather
    than waiting on a tail no write will ever change."""
    from ssewire.mcp.gateway.stores import Gap

    async def main():
        store = _store(redis_url, lease=0.3)
        try:
            stream, got, follower = await _followed(store)
            await store.redis.delete(*[store._key(kind, "s", stream) for kind in ("m", "e", "l")])
            with pytest.raises(Gap):
                await asyncio.wait_for(follower, WAIT)
            return got, store._live.tails
        finally:
            await store.aclose()

    got, tails = asyncio.run(main())
    assert got == [(event_id(1, 1), b"a")] and not tails


def test_an_ended_tail_stays_only_while_its_followers_catch_up(monkeypatch):
    from ssewire.mcp.gateway.stores import live

    monkeypatch.setattr(live, "ENDED_KEPT", 0.05)

    async def main():
        tails = live.LiveTails()
        tails.start(("s", 1), 1)
        tails.add(("s", 1), 1, [_stored(1, size=100)], final=True)
        tails.let_go(("s", 1))  # (its writing stopped: an ended tail is still read to its end)
        kept = tails.get(("s", 1)) is not None
        await asyncio.sleep(0.2)
        return kept, tails.tails, tails.size

    assert asyncio.run(main()) == (True, {}, 0)


def test_the_tails_of_a_process_are_bounded_together_oldest_let_go_first():
    async def main():
        tails = LiveTails(budget=250)
        for stream in (1, 2, 3):
            tails.start(("s", stream), 1)
            tails.add(("s", stream), 1, [_stored(1, size=100)])
        oldest_woken = tails.get(("s", 1)) is None  # 300 bytes: the first tail went
        first = tails.get(("s", 2))
        assert first is not None
        waiting = first.changed
        tails.add(("s", 3), 2, [_stored(2, size=400)])  # over the budget alone: it stays, the others go
        return oldest_woken, waiting.is_set(), list(tails.tails), tails.size

    assert asyncio.run(main()) == (True, True, [("s", 3)], 500)
