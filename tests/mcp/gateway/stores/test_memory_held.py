"""The memory store holds what its budget counts: events relayed through an outbox (the
gateway's path: a message re-encoded, stored) cost the bytes their length says plus the
log's fixed cost per event, not a serializer's spare buffer."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc

from ssewire.mcp.gateway.outbox import Outbox
from ssewire.mcp.gateway.stores import CallRecord, MemoryStore, Position


def test_short_relayed_messages_hold_no_more_than_the_store_counts():
    async def main() -> tuple[int, int]:
        store = MemoryStore()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for call in range(200):
                stream = await store.open_stream("s", CallRecord(call, "tools/call"))
                outbox = Outbox(store, "s", stream)
                for step in range(3):
                    outbox.put(
                        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": step}}
                    )
                outbox.put({"jsonrpc": "2.0", "id": call, "result": {"content": []}})
                await outbox.close()
                await store.finish("s", stream)
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        return held, store.log.stored

    held, counted = asyncio.run(main())
    assert counted > 0
    assert held < 1.5 * counted, (held, counted)  # before: 6x (4 KiB for each short message)


def test_a_kept_streams_records_leave_the_collectors_books_and_read_back_whole():
    async def main() -> tuple[MemoryStore, int, object]:
        store = MemoryStore()
        stream = await store.open_stream("s", CallRecord(7, "tools/call", "tok"))
        store.append_now("s", stream, [(b"{}", 1.0)], Position("up-1", "0-3", 2.5))
        await store.finish("s", stream)
        return store, stream, await store.state("s", stream)

    store, stream, state = asyncio.run(main())
    gc.collect()
    gc.collect()
    kept = store.log.get(("s", stream))
    assert kept is not None and not any(
        map(gc.is_tracked, (kept.meta, kept.events, *store.positions.values()))
    )
    assert state.call == CallRecord(7, "tools/call", "tok") and type(state.call) is CallRecord
    assert state.position == Position("up-1", "0-3", 2.5) and type(state.position) is Position
