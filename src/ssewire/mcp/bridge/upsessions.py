"""What the bridge holds for its stateless clients on an upstream with sessions: each
upstream session (its engine, its calls by their upstream id, its listeners), each call
relayed on it (the engine's request, what its stream brought for the client, parked
between input rounds), and a session's healing figures. `to_sessions.ToSessions` drives
them."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..client import Client
from ..protocol.params import Binding
from ..protocol.requests import notification


@dataclass(eq=False)
class Listener:
    ident: Any
    methods: frozenset[str]
    uris: frozenset[str]
    queue: asyncio.Queue[dict[str, Any] | None]
    failed: str | None = None


@dataclass(eq=False)
class UpSession:
    owner: str
    principal: str | None
    info: dict[str, Any]  # the client's clientInfo, sent at initialize
    capabilities: dict[str, Any]
    log_level: str | None
    engine: Client | None = None  # the upstream session (None until it is opened)
    calls: int = 0  # in flight or parked
    by_up_id: dict[Any, Call] = field(default_factory=dict)  # calls by their upstream id now
    listeners: set[Listener] = field(default_factory=set)
    subscribed: Counter[str] = field(default_factory=Counter)
    get_stream: asyncio.Task[None] | None = None  # the engine's GET stream, while one listens
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tools: dict[str, tuple[Binding, ...]] | None = None  # each tool's x-mcp-header arguments, as listed
    tools_listed: float = 0.0  # when (monotonic)

    @property
    def working(self) -> bool:
        return self.calls > 0

    @property
    def busy(self) -> bool:
        return self.calls > 0 or bool(self.listeners)

    @property
    def server(self) -> dict[str, Any]:
        """What the upstream's initialize said (capabilities, serverInfo, instructions)."""
        return self.engine.server_info if self.engine is not None else {}


@dataclass(eq=False)
class Call:
    """One downstream call relayed upstream: the engine's request (``task``, its response
    message), and what its stream delivered for the client meanwhile (``items``: its
    notifications, and the upstream's requests with the futures their answers go to).
    Parked between rounds, waiting on the client's retry."""

    session: UpSession
    method: str
    name: str | None
    owner: str
    token: Any  # the client's progress token, if it sent one
    items: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[dict[str, Any]] | None = None
    up_id: Any = None  # the engine's id for it now (a re-issue changes it)
    asked: dict[str, asyncio.Future[Any]] = field(default_factory=dict)  # input key -> its answer
    round: int = 0
    expires: float = 0.0

    def sent(self, up_id: Any) -> None:
        """The engine sent the request under ``up_id``: the id its stream's messages carry."""
        if self.up_id is not None and self.session.by_up_id.get(self.up_id) is self:
            del self.session.by_up_id[self.up_id]
        self.up_id = up_id
        self.session.by_up_id[up_id] = self

    def progressed(self, params: dict[str, Any]) -> None:
        """Progress of the call, under the client's own token again."""
        params = {**params, "progressToken": self.token}
        self.items.put_nowait(("event", notification("notifications/progress", params)))

    async def next_item(self, timeout: float | None = None) -> tuple[str, Any]:
        """The next thing the call's stream brought, or ``("answer", message)`` once the
        engine has the response; `Quiet` when ``timeout`` passes first."""
        assert self.task is not None
        if self.items.empty() and not self.task.done():
            getting = asyncio.ensure_future(self.items.get())
            done, _ = await asyncio.wait(
                {getting, self.task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if getting in done:
                return getting.result()
            getting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await getting
            if not done:
                raise Quiet
        if not self.items.empty():  # what the stream brought before the response goes first
            return self.items.get_nowait()
        return "answer", self.task.result()  # its failure raised

    async def close(self, reason: str | None) -> None:
        """The call given up: its engine request stopped (``reason``: cancelled upstream, as
        a client that leaves cancels), its questions unanswered."""
        for future in self.asked.values():
            if not future.done():
                future.cancel()
        task, self.task = self.task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            if reason is not None and self.up_id is not None and self.session.engine is not None:
                params = {"requestId": self.up_id, "reason": f"bridge: {reason}"}
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.session.engine.notify("notifications/cancelled", params))
        if self.session.by_up_id.get(self.up_id) is self:
            del self.session.by_up_id[self.up_id]


class Quiet(Exception):
    """No message came within the time asked."""


def figures_of(engine: Client) -> dict[str, float]:
    """How one upstream session healed, under the relay's metric names."""
    stats = engine.statistics()
    return {
        "bridge_resets_absorbed_total": stats["resets"],
        "bridge_resumptions_total": stats["resumptions"],
        "bridge_unsafe_resumptions_total": stats["unsafe_resumptions"],
        **{f"reissues_total:{why}": count for why, count in stats["reissue_reasons"].items()},
    }
