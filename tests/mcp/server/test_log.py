"""The server core's event log: one byte budget over all streams, one eviction order
(finished streams first, oldest first, then the oldest events of running ones, never the
event just stored) and one follower that never yields a silent gap."""

import asyncio

import pytest

from ssewire.mcp.server.log import EVENT_COST, STREAM_COST, EventLog, Gap, follow


def _books(log: EventLog) -> int:
    return sum(stream.size for stream in log.streams.values())


def test_events_are_numbered_in_their_stream_and_the_books_balance():
    log = EventLog(max_bytes=1 << 20, max_events=10)
    a, b = log.open("a"), log.open("b")
    assert log.append(a, [(b"x", None), (b"yy", None)]) == 2
    assert log.append(b, [(b"z", 1.5)]) == 1
    assert [seq for seq, _, _ in a.events] == [1, 2] and b.events[0] == (1, b"z", 1.5)
    assert log.stored == _books(log) == 2 * STREAM_COST + 3 * EVENT_COST + 4


def test_a_stream_keeps_its_newest_max_events():
    log = EventLog(max_bytes=1 << 20, max_events=3)
    stream = log.open("s")
    log.append(stream, [(bytes([n]), None) for n in range(5)])
    assert [seq for seq, _, _ in stream.events] == [3, 4, 5] and stream.evicted == 2
    assert log.stored == _books(log)
    own = log.open("own", max_events=1)
    log.append(own, [(b"a", None), (b"b", None)])
    assert [data for _, data, _ in own.events] == [b"b"]


def test_past_the_budget_finished_streams_go_first_oldest_first():
    log = EventLog(max_bytes=3 * STREAM_COST + 3 * (EVENT_COST + 1000), max_events=100)
    running = log.open("running")
    log.append(running, [(b"r" * 1000, None)])
    first, second = log.open("first"), log.open("second")
    for stream in (first, second):
        log.append(stream, [(b"f" * 1000, None)], final=True)
    newest = log.open("newest")
    log.append(newest, [(b"n" * 1000, None)])
    assert "first" not in log and "second" in log and "running" in log
    assert running.evicted == 0 and log.stored == _books(log) <= log.max_bytes


def test_with_every_stream_running_the_oldest_events_go_but_never_the_newest_one():
    log = EventLog(max_bytes=2 * STREAM_COST + 2 * (EVENT_COST + 1000), max_events=100)
    old, new = log.open("old"), log.open("new")
    log.append(old, [(b"o" * 1000, None), (b"o" * 1000, None)])
    log.append(new, [(b"n" * 1000, None)])
    assert old.evicted >= 1 and new.evicted == 0
    huge = log.append(new, [(b"h" * 100_000, None)])  # larger than the whole budget
    assert new.events[-1][:2] == (huge, b"h" * 100_000)


def test_a_forgotten_stream_is_told_to_the_log_owner():
    told = []
    log = EventLog(max_bytes=2 * STREAM_COST + EVENT_COST, max_events=10, on_forget=told.append)
    done = log.open("done")
    log.append(done, [(b"x", None)], final=True)
    log.open("next")
    assert told == [done] and "done" not in log
    with pytest.raises(Gap):
        log.append(done, [(b"late", None)])
    by_hand = log.get("next")
    log.forget(by_hand)
    log.forget(by_hand)  # told once: it was kept only the first time
    assert told == [done, by_hand]


def test_the_follower_yields_batches_in_order_until_the_stream_ends():
    log = EventLog(max_bytes=1 << 20, max_events=100)
    stream = log.open("s")

    async def main():
        got = []

        async def read():
            async for batch in follow(stream, 0):
                got.append([data for _, data, _ in batch])

        reader = asyncio.ensure_future(read())
        log.append(stream, [(b"1", None), (b"2", None)])
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        log.append(stream, [(b"3", None)], final=True)
        await asyncio.wait_for(reader, 5)
        return got

    got = asyncio.run(main())
    assert [data for batch in got for data in batch] == [b"1", b"2", b"3"] and len(got) == 2


def test_a_follower_resumes_after_a_number_and_many_follow_one_stream():
    log = EventLog(max_bytes=1 << 20, max_events=100)
    stream = log.open("s")
    log.append(stream, [(bytes([n]), None) for n in range(1, 6)], final=True)

    async def read(after):
        return [seq async for batch in follow(stream, after) for seq, _, _ in batch]

    async def main():
        return await asyncio.gather(read(0), read(3), read(5))

    assert asyncio.run(main()) == [[1, 2, 3, 4, 5], [4, 5], []]


def test_a_follower_the_log_outran_gets_a_gap_never_a_silent_skip():
    log = EventLog(max_bytes=1 << 20, max_events=2)
    stream = log.open("s")
    log.append(stream, [(b"1", None)])

    async def main():
        reader = follow(stream, 0)
        assert [seq for seq, _, _ in await reader.__anext__()] == [1]
        log.append(stream, [(b"2", None), (b"3", None), (b"4", None)])  # 2 is evicted unread
        with pytest.raises(Gap):
            await reader.__anext__()

    asyncio.run(main())


def test_a_follower_of_a_forgotten_stream_learns_it_unless_it_had_everything():
    log = EventLog(max_bytes=1 << 20, max_events=10)
    running, finished = log.open("running"), log.open("finished")
    log.append(running, [(b"1", None)])
    log.append(finished, [(b"1", None)], final=True)

    async def main():
        cut, whole = follow(running, 0), follow(finished, 1)
        await cut.__anext__()
        log.forget(running)
        log.forget(finished)
        with pytest.raises(Gap):
            await cut.__anext__()
        assert [batch async for batch in whole] == []  # it had sent all of a finished one

    asyncio.run(main())
    assert log.stored == 0 and not log.streams


def test_a_resumption_past_what_the_stream_reached_is_a_gap():
    log = EventLog(max_bytes=1 << 20, max_events=10)
    stream = log.open("s")
    log.append(stream, [(b"1", None)])

    async def main():
        with pytest.raises(Gap):
            await follow(stream, 5).__anext__()

    asyncio.run(main())


@pytest.mark.parametrize("bound", ["max_bytes", "max_events"])
def test_bounds_below_one_are_refused(bound):
    with pytest.raises(ValueError, match=bound):
        EventLog(**{"max_bytes": 10, "max_events": 10, bound: 0})


def test_the_one_event_id_scheme_reads_back_what_it_writes_and_nothing_else():
    from ssewire.mcp.server.log import event_id, parse_event_id

    assert parse_event_id(event_id(3, 17)) == (3, 17)
    for other in ("3", "3-0", "3-x", "-1", "3-²", "1-" + "9" * 60, "", "a-1"):
        assert parse_event_id(other) is None, other


def test_written_frames_a_stored_message_under_its_id_and_an_empty_one_as_the_priming_event():
    from ssewire import RawDecoder
    from ssewire.mcp.server.log import written

    message = b'{"jsonrpc": "2.0",\n "id": 1, "result": {}}'  # over two lines, as a body may come
    pieces = written("2-5", message, retry_ms=500)
    assert b"".join(written("2-4", b"", retry_ms=500)) == b"id: 2-4\nretry: 500\ndata: \n\n"
    decoder = RawDecoder()
    (event,) = decoder.feed(b"".join(pieces))
    assert (event.type, event.id, event.data) == ("message", "2-5", message)  # its bytes, as stored
    assert message not in pieces or pieces.count(message) == 1


def test_a_finished_stream_leaves_the_collector_one_object_to_walk():
    """A full log is mostly finished streams: each full collection walked every event and
    waiter of them (380 ms in a gateway). Finished, a stream's events are a sealed tuple of
    tuples the collector drops from its books, and the event its followers waited on goes."""
    import gc

    log = EventLog(max_bytes=1 << 20, max_events=100)
    stream = log.open("s")

    async def main() -> list[bytes]:
        got: list[bytes] = []

        async def read() -> None:
            async for batch in follow(stream, 0):
                got.extend(data for _, data, _ in batch)

        reader = asyncio.ensure_future(read())
        await asyncio.sleep(0)  # it waits on the stream's event
        assert stream._changed is not None
        log.append(stream, [(b"1", 1.0), (b"2", 2.0)], final=True)
        await asyncio.wait_for(reader, 5)
        return got

    assert asyncio.run(main()) == [b"1", b"2"]
    gc.collect()
    gc.collect()  # (the outer tuple is let go once its members were)
    assert type(stream.events) is tuple and stream._changed is None
    assert not gc.is_tracked(stream.events) and not any(map(gc.is_tracked, stream.events))
    # appended to again (an explicit error after its end) or trimmed, it unseals
    log.append(stream, [(b"3", None)])
    assert [seq for seq, _, _ in stream.events] == [1, 2, 3] and log.stored == _books(log)
