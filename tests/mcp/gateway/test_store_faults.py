"""A store that fails never leaves a silent gap: an outbox's write that fails is tried again
(nothing stored twice), and past its deadline the call ends with an explicit error that its
followers get; its lease stops. Run on a fake failing store and on a real redis-server made
to refuse writes (maxmemory), stall (SIGSTOP), drop its connections (CLIENT KILL) and
restart. Also: DELETE leaves no key of the session, an answer no one asked for is not
stored, a cancellation reaches the replica relaying the call, and what a store logs on
failure names no session."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import time
from typing import Any

import pytest

from ssewire.mcp.gateway import outbox as outbox_module
from ssewire.mcp.gateway.metrics import Metrics
from ssewire.mcp.gateway.outbox import Outbox
from ssewire.mcp.gateway.relay import Relay
from ssewire.mcp.gateway.stores import CallRecord, MemoryStore, Position, SessionRecord, Store, StoreFailed
from tests.support.redis_server import RedisControl, controlled_redis

LEASE = 0.6  # seconds: a short lease, so a lapse shows within a test
WAIT = 10.0
SESSION = secrets.token_hex(16)  # a session id as the gateway makes them: it must appear in no log line


@pytest.fixture(scope="module")
def server() -> Any:
    with controlled_redis() as control:
        yield control


@pytest.fixture
def deadline(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(outbox_module, "STORE_DEADLINE", 1.5)
    return 1.5


def redis_store(server: RedisControl, **options: Any) -> Any:
    from ssewire.mcp.gateway.stores.redis import RedisStore

    return RedisStore.from_url(server.url, prefix=f"t:{secrets.token_hex(3)}:", lease=LEASE, **options)


class Failing(MemoryStore):
    """A memory store whose next ``failures`` writes raise (as Redis refusing them would)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures, self.calls = failures, 0

    async def append(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1
        if self.failures > 0:
            self.failures -= 1
            raise StoreFailed("ResponseError: OOM command not allowed")
        await super().append(*args, **kwargs)


async def followed(store: Store, session: str, stream: int, after: int = 0) -> list[tuple[str, bytes]]:
    async def read() -> list[tuple[str, bytes]]:
        return [(e.event_id, e.data) async for batch in store.follow(session, stream, after) for e in batch]

    return await asyncio.wait_for(read(), WAIT)


def checked(events: list[tuple[str, bytes]], stream: int) -> tuple[list[int], dict[str, Any] | None]:
    """The progress values delivered and the error that ended the stream (if one did);
    ids contiguous from 1, no duplicate, nothing after an error."""
    assert [e for e, _ in events] == [f"{stream}-{n}" for n in range(1, len(events) + 1)], events
    values, error = [], None
    for _, data in events:
        assert error is None, "nothing comes after the error"
        if not data:
            continue  # the priming event
        message = json.loads(data)
        if "error" in message:
            error = message
        else:
            values.append(message["n"])
    assert values == list(range(1, len(values) + 1)), values  # no gap, no duplicate
    return values, error


async def writing(outbox: Outbox, count: int, every: float) -> None:
    for n in range(1, count + 1):
        outbox.put({"n": n})
        await asyncio.sleep(every)
    await outbox.close()


# -- the outbox, on a fake failing store ---------------------------------------------------


def test_an_outbox_tries_a_failed_write_again_and_stores_everything_once():
    async def main() -> None:
        store = Failing(failures=3)
        stream = await store.open_stream("s", CallRecord(1, "tools/call"))
        outbox = Outbox(store, "s", stream)
        reader = asyncio.ensure_future(followed(store, "s", stream))
        await writing(outbox, 5, 0.01)
        values, error = checked(await reader, stream)
        assert values == [1, 2, 3, 4, 5] and error is None and store.calls > 3 and outbox.task.done()

    asyncio.run(main())


def test_an_outbox_keeps_the_upstream_position_only_where_another_replica_could_read_it():
    """Where the upstream answer stands is stored with the events of a store written
    through its task (a replica's), for whoever takes the call over; a store in memory,
    one process's, is written in the caller's step without it (never read there)."""

    class Client:
        asked = 0

        def position(self, ident: Any) -> str:
            Client.asked += 1
            return "up-7"

    async def main() -> list[tuple[Any, int]]:
        found = []
        for store in (MemoryStore(), Failing(failures=0)):  # in the step / through the task
            Client.asked = 0
            stream = await store.open_stream("s", CallRecord(1, "tools/call"))
            outbox = Outbox(store, "s", stream, client=Client())  # type: ignore[arg-type]
            outbox.upstream = 41
            for n in range(3):
                outbox.put({"n": n})
            await asyncio.wait_for(outbox.close(), 2)
            found.append((await store.state("s", stream), Client.asked))
        return found

    (in_memory, asked_in_memory), (through_task, asked_through_task) = asyncio.run(main())
    assert in_memory.done and in_memory.next == 4 and in_memory.position is None
    assert asked_in_memory == 0  # not even computed
    assert through_task.done and through_task.next == 4
    assert through_task.position == Position(41, "up-7", None) and asked_through_task >= 1


def test_an_outbox_in_memory_ends_once_its_stream_is_forgotten_and_writes_nowhere():
    """A store in memory looks a stream up once, at its first message: when the store's
    budget forgets the stream later, the next message ends the outbox (`Gap`), and
    nothing is written to the stream it held, nor to a new one of the same session."""

    async def main() -> None:
        store = MemoryStore()
        stream = await store.open_stream("s", CallRecord(1, "tools/call"))
        outbox = Outbox(store, "s", stream)
        outbox.put({"n": 1})
        kept = store.log.get(("s", stream))
        assert kept is not None and kept.next_seq == 2 and not outbox.ended
        store.log.forget(kept)
        other = await store.open_stream("s", CallRecord(2, "tools/call"))
        outbox.put({"n": 2})
        assert outbox.ended and kept.next_seq == 2 and not kept.events
        assert store.log.get(("s", other)).next_seq == 1  # (nothing went to the new one)

    asyncio.run(main())


def test_an_outbox_whose_store_keeps_failing_ends_its_call_with_an_explicit_error(deadline):
    async def main() -> None:
        store = Failing(failures=10**6)
        stream = await store.open_stream("s", CallRecord(9, "tools/call"))
        outbox = Outbox(store, "s", stream)
        outbox.call_id = 9
        told: list[Outbox] = []
        outbox.on_failed = told.append
        reader = asyncio.ensure_future(followed(store, "s", stream))
        started = time.monotonic()
        outbox.put({"n": 1})
        events = await reader
        took = time.monotonic() - started
        values, error = checked(events, stream)
        assert values == [] and error is not None and error["id"] == 9
        assert error["error"]["data"] == {"gateway": "store"}
        assert told == [outbox] and outbox.failed and deadline - 0.5 < took < deadline + 2
        outbox.put({"n": 2})  # after the end: nowhere
        await asyncio.wait_for(outbox.close(), 2)
        assert outbox.task.done() and not outbox.items

    asyncio.run(main())


def test_a_relay_stops_the_call_whose_store_failed(deadline):
    """The call's task is cancelled (its stream ends with the store's error): a relay task
    finishes its stream on every path, and none is left pending."""

    async def main() -> None:
        store = Failing(failures=0)
        relay = Relay(
            SessionRecord("s", "2025-11-25", None), store=store, metrics=Metrics(), client=_client, timeout=30
        )
        stream = await relay.open_stream(CallRecord(4, "tools/call"))
        store.failures = 10**6  # from here on
        outbox = relay.outboxes[stream]
        outbox.call_id = 4

        async def call() -> None:
            outbox.caller = asyncio.current_task()
            outbox.put({"n": 1})
            await asyncio.sleep(60)

        relay.calls[4] = task = asyncio.ensure_future(call())
        _, error = checked(await followed(store, "s", stream), stream)
        assert error is not None and error["id"] == 4
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 2)
        assert task.cancelled() and stream not in relay.outboxes
        await asyncio.wait_for(relay.close(end_upstream=False), 5)
        assert outbox.task.done()

    asyncio.run(main())


def _client(**options: Any) -> Any:
    from ssewire.mcp.client import Client

    return Client("http://127.0.0.1:9/mcp", listen=False, **options)


# -- a real redis-server, faulted ----------------------------------------------------------


def run_with_fault(server: RedisControl, fault: Any, undo: Any, *, hold: float, count: int = 40) -> Any:
    """Write ``count`` events (one every 50 ms) through an outbox to a Redis store while
    ``fault`` holds for ``hold`` seconds from the 5th; what a follower got, and the store."""

    async def main() -> tuple[list[tuple[str, bytes]], int, Any]:
        store = redis_store(server)
        try:
            stream = await store.open_stream(SESSION, CallRecord(1, "tools/call"))
            outbox = Outbox(store, SESSION, stream)
            outbox.call_id = 1
            reader = asyncio.ensure_future(followed(store, SESSION, stream))

            async def faulting() -> None:
                await asyncio.sleep(0.25)
                fault()
                try:
                    await asyncio.sleep(hold)
                finally:
                    undo()

            faults = asyncio.ensure_future(faulting())
            await asyncio.wait_for(writing(outbox, count, 0.05), WAIT + hold)
            events = await reader
            await faults
            return events, stream, store
        finally:
            await store.aclose()

    return asyncio.run(main())


def test_redis_refusing_writes_for_a_moment_delays_events_but_loses_none(server):
    events, stream, _ = run_with_fault(server, server.refuse_writes, server.accept_writes, hold=1.0)
    values, error = checked(events, stream)
    assert values == list(range(1, 41)) and error is None


def test_redis_refusing_writes_past_the_deadline_ends_the_call_with_an_explicit_error(
    server, deadline, caplog
):
    caplog.set_level(logging.DEBUG, logger="ssewire")
    events, stream, _ = run_with_fault(
        server, server.refuse_writes, server.accept_writes, hold=deadline + 1.5
    )
    values, error = checked(events, stream)
    assert error is not None and error["error"]["data"] == {"gateway": "store"} and len(values) < 40
    said = "\n".join(f"{r.name}: {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "memory" in said and SESSION not in said and not re.search("t:[0-9a-f]{6}:", said)  # no key


def test_a_stalled_redis_within_the_deadline_loses_nothing(server):
    events, stream, _ = run_with_fault(server, server.pause, server.resume, hold=1.5)
    values, error = checked(events, stream)
    assert values == list(range(1, 41)) and error is None


def test_cut_connections_during_writes_store_nothing_twice(server):
    async def main() -> list[tuple[str, bytes]]:
        store = redis_store(server)
        try:
            stream = await store.open_stream("sess", CallRecord(1, "tools/call"))
            outbox = Outbox(store, "sess", stream)
            reader = asyncio.ensure_future(followed(store, "sess", stream))

            async def blips() -> None:
                for _ in range(8):
                    await asyncio.sleep(0.07)
                    await asyncio.to_thread(server.blip)

            cutting = asyncio.ensure_future(blips())
            await writing(outbox, 40, 0.02)
            await cutting
            events = await reader
            return events
        finally:
            await store.aclose()

    events = asyncio.run(main())
    values, error = checked(events, 1)
    assert values == list(range(1, 41)) and error is None


def test_a_write_whose_reply_was_lost_sent_again_stores_nothing_twice(server):
    async def main() -> None:
        store = redis_store(server)
        try:
            stream = await store.open_stream("s")
            await store.append("s", stream, [(b'{"n":1}', 0.0), (b'{"n":2}', 0.0)])
            store._next[("s", stream)] = 1  # as if the reply had not come: the same write again
            await store.append("s", stream, [(b'{"n":1}', 0.0), (b'{"n":2}', 0.0)])
            await store.append("s", stream, [(b'{"n":3}', 0.0)], final=True)
            assert [e for e, _ in await followed(store, "s", stream)] == ["1-1", "1-2", "1-3"]
        finally:
            await store.aclose()

    asyncio.run(main())


def test_a_failed_streams_lease_is_renewed_no_more_and_another_replica_may_adopt_it(server):
    async def main() -> None:
        writer, other = redis_store(server), redis_store(server)
        other.prefix = writer.prefix
        try:
            stream = await writer.open_stream("s", CallRecord(1, "tools/call"))
            await writer.append("s", stream, [(b'{"n":1}', 0.0)])
            lease = writer._key("l", "s", stream)
            await asyncio.sleep(LEASE)
            assert await writer.redis.get(lease) == writer.owner.encode()  # renewed
            server.refuse_writes()
            try:
                await writer.fail("s", stream, b'{"error":1}')  # (not stored: Redis refuses it)
                assert not writer._leases
                await asyncio.sleep(LEASE * 1.5)
                assert await writer.redis.get(lease) is None  # lapsed: no one renews it
            finally:
                server.accept_writes()
            await asyncio.sleep(0.3)  # the writer's background try may store its error now...
            state = await other.state("s", stream)
            if not state.done:  # ...or the other replica adopts the stream
                assert await other.adopt("s", stream) is not None
        finally:
            await writer.aclose()
            await other.aclose()

    asyncio.run(main())


def test_a_store_reconnects_on_its_own_after_redis_restarts():
    with controlled_redis() as own:

        async def main() -> None:
            store = redis_store(own)
            try:
                await store.create(SessionRecord("s", "2025-11-25", None))
                await asyncio.to_thread(own.restart)
                started = time.monotonic()
                while True:  # the first commands may meet the old connections' end
                    try:
                        await store.create(SessionRecord("s", "2025-11-25", None))
                        break
                    except StoreFailed:
                        assert time.monotonic() - started < 5
                        await asyncio.sleep(0.1)
                assert await store.load("s") is not None
            finally:
                await store.aclose()

        asyncio.run(main())


# -- sessions, answers, cancellations ----------------------------------------------------


def test_dropping_a_session_leaves_no_key_of_it(server):
    async def main() -> None:
        store = redis_store(server)
        sid, kept = secrets.token_hex(16), secrets.token_hex(16)
        try:
            for ident in (sid, kept):
                await store.create(SessionRecord(ident, "2025-11-25", None))
                for _ in range(3):
                    stream = await store.open_stream(ident, CallRecord(1, "tools/call"))
                    await store.append(ident, stream, [(b"x", 0.0)])
                await store.load(ident)
            waiting = asyncio.ensure_future(store.expect(sid, "gw-1", WAIT))
            await asyncio.sleep(0.1)
            assert any(sid in key for key in server.key_names())
            await store.drop(sid)
            assert [key for key in server.key_names() if sid in key] == []
            assert any(kept in key for key in server.key_names())  # another session's are untouched
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            assert [key for key in server.key_names() if sid in key] == []
        finally:
            await store.aclose()

    asyncio.run(main())


def test_answers_no_one_asked_for_are_never_stored(server):
    async def main() -> None:
        store = redis_store(server, max_answer_bytes=1 << 16)
        try:
            big = {"jsonrpc": "2.0", "id": "gw-x", "result": {"blob": "x" * 1000}}
            for n in range(50):
                assert await store.answered("s", {**big, "id": f"gw-{n}"}) is False
            assert [key for key in server.key_names() if key.startswith(store.prefix)] == []
            waiting = asyncio.ensure_future(store.expect("s", "gw-big", WAIT))
            await asyncio.sleep(0.1)
            assert await store.answered("s", {**big, "id": "gw-big", "result": "y" * (1 << 17)}) is False
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
        finally:
            await store.aclose()

    asyncio.run(main())


def test_a_cancellation_posted_at_one_replica_stops_the_call_at_the_other(server):
    async def main() -> None:
        prefix = f"t:{secrets.token_hex(3)}:"
        at_a, at_b = (redis_store(server) for _ in range(2))
        at_a.prefix = at_b.prefix = prefix
        record = SessionRecord(secrets.token_hex(16), "2025-11-25", None)
        relays = [
            Relay(record, store=store, metrics=Metrics(), client=_client, timeout=30)
            for store in (at_a, at_b)
        ]
        try:
            call = asyncio.ensure_future(asyncio.sleep(60))
            relays[1].calls[7] = call  # relayed at B
            await asyncio.sleep(0.3)  # both subscribed
            await relays[0].cancel_anywhere(7, "no longer needed")  # posted at A: not there
            await asyncio.wait_for(asyncio.gather(call, return_exceptions=True), 3)
            assert call.cancelled()
        finally:
            for relay in relays:
                await relay.close(end_upstream=False)
            assert at_a._listening is None and at_b._listening is None  # no subscription left
            await at_a.aclose()
            await at_b.aclose()

    asyncio.run(main())


def test_what_a_failing_redis_store_raises_and_logs_names_no_session(server, caplog):
    caplog.set_level(logging.DEBUG, logger="ssewire")
    sid = secrets.token_hex(16)

    async def main() -> list[str]:
        store = redis_store(server)
        texts = []
        try:
            stream = await store.open_stream(sid)
            server.refuse_writes()
            try:
                for attempt in (
                    store.create(SessionRecord(sid, "2025-11-25", None)),
                    store.append(sid, stream, [(b"x", 0.0)]),
                    store.open_stream(sid),
                ):
                    with pytest.raises(StoreFailed) as failed:
                        await attempt
                    texts.append(str(failed.value))
            finally:
                server.accept_writes()
        finally:
            await store.aclose()
        return texts

    texts = asyncio.run(main())
    assert all(
        "memory" in text and sid not in text and not re.search("t:[0-9a-f]{6}:", text) for text in texts
    )
    assert all(sid not in record.getMessage() for record in caplog.records)
