"""The memory store holds what its budget counts: events relayed through an outbox (the
gateway's path: a message re-encoded, stored) cost the bytes their length says plus the
log's fixed cost per event, not a serializer's spare buffer."""

from __future__ import annotations

import asyncio
import tracemalloc

from ssewire.mcp.gateway.outbox import Outbox
from ssewire.mcp.gateway.stores import CallRecord, MemoryStore


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
