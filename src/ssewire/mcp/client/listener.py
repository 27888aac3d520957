"""The client's standalone GET stream (2025 revisions), on its engine: what the server sends
on its own, resumed with ``Last-Event-ID`` (or opened again) when it breaks, with a growing
pause, given up after ``max_resumptions`` failures in a row."""

from __future__ import annotations

import asyncio
import logging

import httpx

from ..protocol import requests
from ..streams.guard import UnsafeResumption
from ..transport.http import MessageTooLarge as MessageTooLarge  # what a call over the limit raises
from .counters import FIGURES_KEPT as FIGURES_KEPT  # the newest figures kept in each list of statistics
from .counters import ClientStats as ClientStats  # what it counts (``Client.stats``)
from .engine import Engine, _backoff, _Broken, _stop

log = logging.getLogger("ssewire.mcp.client")

# seconds at most that opening a session waits for the server to answer its GET stream
LISTEN_WAIT = 10.0


def _settle(answered: asyncio.Future[None] | None) -> None:
    if answered is not None and not answered.done():
        answered.set_result(None)


class Listener(Engine):
    """The GET stream (the base of `Client`)."""

    async def _start_listening(self) -> None:
        """Open the standalone GET stream and wait until the server has answered it (opened,
        refused or failed; at most `LISTEN_WAIT` seconds): a server may send its own requests
        only on that stream and drop them while none is open (the TypeScript SDK's does), so
        no request of this client's may reach it first and lose what it asks back."""
        self._spawn_listener()
        await self._get_settled()

    async def _unlisten(self) -> None:
        """Stop the GET stream's listener, if any, keeping ``listen`` as it is: a session
        whose opening failed or was cancelled leaves no GET stream held open."""
        listener, self._listener = self._listener, None
        if listener is not None:
            await _stop([listener])

    def _spawn_listener(self) -> None:
        self._get_answered = asyncio.get_running_loop().create_future()
        self._listener = asyncio.ensure_future(self._listen(self._get_answered))

    async def _get_settled(self) -> None:
        """Until the GET stream's first answer is in (at most `LISTEN_WAIT` seconds)."""
        answered, listener = self._get_answered, self._listener
        if answered is None or listener is None or answered.done():
            return
        bound = min(self.timeout, LISTEN_WAIT)
        await asyncio.wait((answered, listener), timeout=bound, return_when=asyncio.FIRST_COMPLETED)

    async def _listen(self, answered: asyncio.Future[None] | None = None) -> None:
        """The standalone GET stream, resumed (or reopened) when it breaks, with a growing
        pause; it stops when the server has none (405) or the session is gone (404: the next
        request re-initializes), or after ``max_resumptions`` failures in a row. What broke
        it last is ``listen_error``, and logged; an unexpected error ends it, kept the same.
        ``answered`` is set once the first GET has its answer (or failed)."""
        try:
            await self._listening(answered)
        except Exception as exc:  # a defect, not a peer's fault: never a silent end
            self.listen_error = exc
            log.exception("the GET stream's listener failed")
        finally:
            _settle(answered)

    async def _listening(self, answered: asyncio.Future[None] | None) -> None:
        stream: str | None = None
        failures = 0  # in a row: the listener gives up past max_resumptions
        quiet = 0  # clean ends in a row that brought nothing: a growing pause, not a failure
        while not self._closed and failures <= self.max_resumptions:
            resuming = False
            try:
                if stream is not None and self.guard.cursor(stream) is not None:
                    stream, answer = await self._resume(stream)
                    resuming = True
                    self._told("resumption", {"stream": "get", "attempt": failures})
                else:
                    try:
                        answer = await self._send("GET", requests.get_headers(self._speaking, self.session))
                    except asyncio.TimeoutError:
                        raise _Broken("no answer to the GET") from None
                    if answer.status in (404, 405):
                        await answer.aclose()
                        return
                    if answer.status != 200:  # 409 (a GET stream still open), 5xx: later
                        await answer.aclose()
                        raise _Broken(f"GET answered {answer.status}")
                    if stream is not None:
                        self.guard.finish(stream)  # the previous chain had nothing to resume from
                    stream = self.guard.open_get(self.session)
                self.stats.get_opened()
                _settle(answered)
                leg = stream
                try:
                    delivered = await self._consume(leg, answer, None)
                    failures = 0
                    quiet = 0 if delivered else quiet + 1
                    if resuming and not delivered:  # the server has no more on this chain: a fresh GET
                        self.guard.finish(leg)
                        stream = None
                except _Broken as broke:
                    self.stats.resets += 1
                    self._told("reset", {"stream": "get", "attempt": failures + 1})
                    self.guard.broken(leg)
                    self._get_failed(broke)
                    failures += 1
                finally:
                    self.stats.get_closed()
            except _Broken as broke:
                _settle(answered)
                stream = broke.stream or stream
                self._get_failed(broke)
                failures += 1  # the resumption itself broke: try again from the same cursor
            except (UnsafeResumption, httpx.HTTPError) as exc:  # start a fresh GET stream
                _settle(answered)
                self._get_failed(exc)
                if stream is not None:
                    self.guard.finish(stream)
                stream = None
                failures += 1
            if failures:
                self.stats.get_failures += 1
            await asyncio.sleep(_backoff(failures + quiet))
        if failures:
            log.error("gave up the GET stream after %d failures in a row: %s", failures, self.listen_error)

    def listen_now(self) -> None:
        """Open the standalone GET stream now, in a session opened with ``listen=False``: a
        relay does when its own client opens one, so the server's own messages have
        somewhere to go, and no GET is held open for nobody."""
        self.listen = True
        if self.session is not None and self._listener is None and not self._closed and not self.modern:
            self._spawn_listener()

    async def open_listening(self) -> None:
        """`listen_now`, then wait until the server has answered the GET (opened, refused or
        failed; at most `LISTEN_WAIT` seconds), so nothing sent after it can overtake it: a
        relay does before it answers its own client's GET, whose next request would
        otherwise reach the server first (and lose what the server asks back on the GET)."""
        self.listen_now()
        await self._get_settled()

    async def listened(self) -> None:
        """`listen_now`, then wait until the GET stream ends for good: the server has none
        (405), the session is gone (404: the next request opens another), or it broke
        ``max_resumptions`` times in a row (``listen_error`` says why). A relay ends its
        listeners' streams then."""
        self.listen_now()
        if self._listener is not None:
            await asyncio.shield(self._listener)

    async def stop_listening(self) -> None:
        """Close the standalone GET stream (`listen_now` opens it again)."""
        self.listen = False
        await self._unlisten()

    def _get_failed(self, error: Exception) -> None:
        self.listen_error = error
        log.warning("the GET stream failed: %s", error)

    @property
    def listening(self) -> bool:
        """Whether the standalone GET stream is open now."""
        return self.stats.get_open
