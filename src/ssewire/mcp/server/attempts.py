"""The sendings of one request a relay sends up again when its answer breaks where nothing
can resume it (the gateway's 2026-07-28 passthrough, the bridge's 2026-07-28 leg): whether
it may be (``protocol.reissue``: lists and reads always, a tool call by the route's
policy), under which id, and which of its messages still go down.

A re-issue is the request as it came under a fresh id of the relay's own, so an answer
the broken sending still produces is never taken for the new one's; the new answer goes
down under the client's id. Its progress goes down only past the highest value the
client was given, so its progress stays increasing and none comes twice (other
notifications of a new sending are that sending's own, and go down)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..._envelope import readdressed
from ..protocol.reissue import (
    ASK,
    MAX_REISSUES,
    ProgressSeen,
    ReissuePolicy,
    ToolHints,
    needs_hints,
    pause,
    reason,
)

log = logging.getLogger("ssewire.mcp.server")

FETCH_RETRY = 10.0  # seconds after a listing failed before another is tried (unknown is unsafe meanwhile)
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
    progress: ProgressSeen = field(default_factory=ProgressSeen)  # what the client was given

    def __post_init__(self) -> None:
        self.sent_id = self.ident

    @property
    def reissued(self) -> bool:
        return self.reissues > 0

    def request(self) -> bytes:
        """The request to send now: as it came, or under the id of this re-issue (every
        other member the bytes it came in)."""
        if not self.reissued:
            return bytes(self.body)
        again = readdressed(self.body, self.sent_id)
        if again is None:  # pragma: no cover - it parsed as an object before it got here
            raise ValueError("the request is no JSON-RPC object")
        return again

    def answer(self, data: bytes) -> bytes | None:
        """The answer to the sending now (a response under its id) under the client's id;
        None for anything else a re-issue brought back (an error page, another id)."""
        if not self.reissued:
            return data
        return readdressed(data, self.ident, was=self.sent_id)

    def passes(self, params: Any) -> bool:
        """Whether a progress notification (its params) goes down: always before a
        re-issue (as the upstream sent it); after one, only above the highest value the
        client was given, so what it sees stays increasing."""
        value = params.get("progress") if isinstance(params, dict) else None
        return self.progress.passes(value, self.reissued)


class Reissuer:
    """A route's rule for sending a request again, and the upstream's tool annotations it
    decides by (learnt from the listings relayed, or fetched when a break needs them).

    :param count: told why (a `reissue.REASONS`) each time a request is sent again.
    :param learn_tools: learns the upstream's annotations into the table it is given, from a
        listing of the relay's own (bounded: ``protocol.reissue.learn_tools``).
    """

    def __init__(
        self,
        policy: ReissuePolicy | None,
        count: Callable[[str], None],
        learn_tools: Callable[[ToolHints], Awaitable[None]],
    ) -> None:
        self.policy, self.count = policy, count
        self.hints = ToolHints()
        self._learn_tools = learn_tools
        self._listing: asyncio.Task[None] | None = None  # one fetch at a time, shared by the calls waiting
        self._failed_at = -FETCH_RETRY  # when a fetch last failed (monotonic): none again for a while

    async def aclose(self) -> None:
        """Stop a listing still being fetched (its waiters have their deadlines)."""
        if self._listing is not None and not self._listing.done():
            self._listing.cancel()
            await asyncio.gather(self._listing, return_exceptions=True)

    def attempts(
        self, ident: Any, body: bytes | bytearray, method: str | None, params: Any, deadline: float | None
    ) -> Attempts:
        repeat = reason(method, params, self.policy, self.hints, ask=True)
        return Attempts(ident, body, method, params, repeat, deadline)

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
        listing fetched (one fetch for all who wait, awaited until the call's deadline at
        most); a tool it does not name, or a listing that did not come, is unsafe."""
        recently_failed = time.monotonic() - self._failed_at < FETCH_RETRY
        if needs_hints(run.method, run.params, self.policy, self.hints) and not recently_failed:
            if self._listing is None or self._listing.done():
                self._listing = asyncio.ensure_future(self._fetch())
            left = None if run.deadline is None else max(run.deadline - time.monotonic(), 0.0)
            try:
                await asyncio.wait_for(asyncio.shield(self._listing), left)
            except asyncio.TimeoutError:
                return None  # (the listing goes on for the calls after this one)
        return reason(run.method, run.params, self.policy, self.hints)

    async def _fetch(self) -> None:
        try:
            await self._learn_tools(self.hints)
        except Exception as failed:  # unknown stays unsafe: the call gets the explicit error
            self._failed_at = time.monotonic()
            log.warning(
                "could not list the upstream's tools for their annotations (%s)", type(failed).__name__
            )
