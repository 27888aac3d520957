"""A draining replica's hand-over of calls that came as the drain began (the race the
rolling-restart test met under load: a call whose stream was being opened in the store, or
whose task had not run yet, was ended with the draining error at once instead of being
given its settle time to have an upstream cursor)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ssewire.mcp.gateway.metrics import Metrics
from ssewire.mcp.gateway.relay import Relay
from ssewire.mcp.gateway.stores import MemoryStore, SessionRecord

UPSTREAM_ID = 77


class SlowOpening(MemoryStore):
    """A store whose streams take a moment to open (as Redis's round trips do)."""

    async def open_stream(self, *args: Any, **kwargs: Any) -> int:
        await asyncio.sleep(0.05)
        return await super().open_stream(*args, **kwargs)


class Upstream:
    """An upstream client whose answer has an event id (a cursor) 50 ms after it is sent."""

    session = None

    def __init__(self, **options: Any) -> None:
        self.cursor: str | None = None

    async def reply(self, method: str, params: Any, *, on_sent: Any, **options: Any) -> dict[str, Any]:
        on_sent(UPSTREAM_ID)
        await asyncio.sleep(0.05)
        self.cursor = "1-1"
        await asyncio.sleep(60)  # the answer comes later: the taker resumes it
        return {"result": {}}

    def position(self, ident: Any) -> str | None:
        return self.cursor if ident == UPSTREAM_ID else None

    async def close(self, end_session: bool = True) -> None:
        pass


@pytest.mark.parametrize("moment", ["while its stream opens", "before its task runs"])
def test_a_call_that_came_as_the_drain_began_is_handed_over_with_its_cursor(moment):
    async def main() -> None:
        store = SlowOpening()
        relay = Relay(
            SessionRecord("s", "2025-11-25", "up"),
            store=store,
            metrics=Metrics(),
            client=Upstream,
            timeout=30,
        )
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "t"}}
        if moment == "while its stream opens":
            starting = asyncio.ensure_future(relay.start_call(call))
            await asyncio.sleep(0.01)
            assert not relay.outboxes  # (its stream is still being opened)
        else:
            opened = await relay.start_call(call)  # in this task: the call's own has not run yet
            starting = asyncio.get_running_loop().create_future()
            starting.set_result(opened)
            assert relay.outboxes[opened].caller is None
        outboxes: list[Any] = []
        real_close = relay.close

        async def closing(**options: Any) -> None:
            outboxes.extend(relay.outboxes.values())
            await real_close(**options)

        relay.close = closing  # type: ignore[method-assign]
        await relay.hand_over("draining", settle=1.0)  # (in this task: no loop step before it looks)
        stream = await starting
        (outbox,) = outboxes
        assert outbox.stream == stream and outbox.handing is not None
        assert outbox.handing.upstream == UPSTREAM_ID and outbox.handing.cursor == "1-1"
        events = [data for _, data, _ in store.log.get(("s", stream)).events]
        assert not any(b"draining" in data for data in events)  # not ended: taken up elsewhere

    asyncio.run(main())
