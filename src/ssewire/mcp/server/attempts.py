"""The sendings of one request a relay sends up again when its answer breaks where nothing
can resume it (the gateway's 2026-07-28 passthrough, the bridge's 2026-07-28 leg): whether
it may be (``protocol.reissue``: lists and reads always, a tool call by the route's
policy), under which id, and which of its messages still go down.

A re-issue is the request as it came under a fresh id of the relay's own, so an answer
the broken sending still produces is never taken for the new one's; the new answer goes
down under the client's id. Its progress goes down only past the highest value the
client was given, so what the client sees stays increasing and nothing comes twice."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from ..protocol.reissue import MAX_REISSUES, ReissuePolicy, ToolHints, needs_hints, pause, reason

log = logging.getLogger("ssewire.mcp.server")

ASK = "ask"  # decided at the first break, once the tools' annotations are known
PROGRESS = "notifications/progress"
_fresh = itertools.count(1)  # the relay's own ids for re-issues, unique in the process


@dataclass
class Attempts:
    """One request's sendings: the id on the wire now, how many re-issues, and the progress
    the client was given."""

    ident: Any  # the client's id
    body: bytes | bytearray  # the request as it came
    method: str | None
    params: Any
    repeat: str | None  # why it may be sent again (a reissue reason, or ASK); None: never
    deadline: float | None
    sent_id: Any = None  # the id of the sending on the wire now (the client's, at first)
    reissues: int = 0
    high: float | None = None  # the highest progress value the client was given

    def __post_init__(self) -> None:
        self.sent_id = self.ident

    @property
    def reissued(self) -> bool:
        return self.reissues > 0

    def request(self) -> bytes:
        """The request to send now: as it came, or under the id of this re-issue."""
        if not self.reissued:
            return bytes(self.body)
        message = orjson.loads(self.body)  # it parsed once already
        message["id"] = self.sent_id
        return orjson.dumps(message)

    def answer(self, data: bytes) -> bytes:
        """An answer to the sending now, under the client's id."""
        if not self.reissued:
            return data
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            return data
        if isinstance(message, dict):
            message["id"] = self.ident
        return orjson.dumps(message)

    def passes(self, params: Any) -> bool:
        """Whether a progress notification (its params) goes down: always before a
        re-issue (as the upstream sent it); after one, only above the highest value the
        client was given, so what it sees stays increasing."""
        value = params.get("progress") if isinstance(params, dict) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return not self.reissued  # no value to compare
        if self.reissued and self.high is not None and value <= self.high:
            return False
        if self.high is None or value > self.high:
            self.high = value
        return True


class Reissuer:
    """A route's rule for sending a request again, and the upstream's tool annotations it
    decides by (learnt from the listings relayed, or fetched when a break needs them).

    :param count: told why (a `reissue.REASONS`) each time a request is sent again.
    :param list_tools: fetches the upstream's tools (a list), for annotations it lacks.
    """

    def __init__(
        self,
        policy: ReissuePolicy | None,
        count: Callable[[str], None],
        list_tools: Callable[[], Awaitable[list[dict[str, Any]]]],
    ) -> None:
        self.policy, self.count = policy, count
        self.hints = ToolHints()
        self._list_tools = list_tools
        self._listing: asyncio.Task[None] | None = None  # one fetch at a time, shared by the calls waiting

    def attempts(
        self, ident: Any, body: bytes | bytearray, method: str | None, params: Any, deadline: float | None
    ) -> Attempts:
        repeat = reason(method, params, self.policy, self.hints)
        if repeat is None and needs_hints(method, params, self.policy, self.hints):
            repeat = ASK
        return Attempts(ident, body, method, params, repeat, deadline)

    def learn(self, data: bytes, ident: Any) -> None:
        """A ``tools/list`` answer relayed (its bytes): its tools' annotations, learnt."""
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if isinstance(message, dict) and message.get("id") == ident:
            self.hints.learn(message.get("result"))

    async def again(self, run: Attempts, why: str) -> bool:
        """Whether ``run`` is sent again after its answer broke (``why``): safe to repeat,
        re-issues left, and time for the pause before it within the deadline; if so, after
        the pause, under a fresh id."""
        if run.repeat == ASK:
            run.repeat = await self._decide(run)
        if run.repeat is None or run.reissues >= MAX_REISSUES:
            return False
        wait = pause(run.reissues)
        if run.deadline is not None and time.monotonic() + wait >= run.deadline:
            return False
        await asyncio.sleep(wait)
        run.reissues += 1
        run.sent_id = f"ssewire-reissue-{next(_fresh)}"
        self.count(run.repeat)
        log.info("%s re-issued (%s; attempt %d): %s", run.method, run.repeat, run.reissues + 1, why)
        return True

    async def _decide(self, run: Attempts) -> str | None:
        """The policy's verdict for a tool whose annotations were not known: the upstream's
        listing fetched (one fetch for all who wait); a tool it does not name is unsafe."""
        if needs_hints(run.method, run.params, self.policy, self.hints):
            if self._listing is None or self._listing.done():
                self._listing = asyncio.ensure_future(self._fetch())
            await asyncio.shield(self._listing)
            name = run.params.get("name") if isinstance(run.params, dict) else None
            if isinstance(name, str) and not self.hints.knows(name):
                self.hints.missing(name)
        return reason(run.method, run.params, self.policy, self.hints)

    async def _fetch(self) -> None:
        try:
            self.hints.learn({"tools": await self._list_tools()})
        except Exception as failed:  # unknown stays unsafe: the call gets the explicit error
            log.warning(
                "could not list the upstream's tools for their annotations (%s)", type(failed).__name__
            )
