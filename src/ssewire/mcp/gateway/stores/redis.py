"""The store of gateway replicas: sessions and streams in Redis, so any replica can relay a
session and replay a stream another one wrote (``pip install 'ssewire[redis]'``).

Keys, under ``prefix`` (``ssewire:gw:`` by default), each expiring ``ttl`` seconds after
the session's last use (answers sooner):

- ``s:<session>``: the session record (JSON); ``n:<session>``: its stream counter;
- ``k:<session>``: the names of every other key of the session (its streams' three, the
  answers awaited and their markers), so `RedisStore.drop` removes all of them, atomically
  (one script), without KEYS or SCAN of the database;
- ``e:<session>:<stream>``: a Redis stream, one entry per event, entry id ``0-<seq>`` (so
  ``Last-Event-ID`` maps to an entry), at most ``max_events`` kept; a last entry ``end``
  finishes it;
- ``m:<session>:<stream>``: what the stream answers, its next seq, its upstream position,
  the tag of the last write (``last``: what makes a write idempotent);
- ``l:<session>:<stream>``: the writer's lease (its owner's token), renewed while it
  writes and only while it is still its own. A follower that finds the stream unfinished
  and the lease gone learns its writer died (`Abandoned`);
- ``w:<session>:<request>``: a replica waits for the downstream answer to its request
  (expiring with the wait); ``a:<session>:<request>``: that answer, pushed only while the
  marker is there (so an answer no one asked for is never stored), at most
  `MAX_ANSWER_BYTES`, expiring with the wait;
- ``r:<bucket>``: a rate limit's token bucket (its tokens and when they were counted, by
  Redis's clock: one for every replica), expiring once it would be full again;
- channel ``c:<session>`` (pub/sub, no key): a downstream cancellation, for whichever
  replica relays the call (each store listens with one pattern subscription, only while a
  relay listens).

Writes are one script each (`APPEND`): it checks the stream's next seq, that it is not done
and that the lease is not another's, then stores the entries, the next seq, the upstream
position and the write's tag together (a stream's last events with its end), so a replica
killed mid-write leaves a stream that ends at a whole event, never one answered but open,
and a write whose reply was lost, sent again, finds its tag and adds nothing twice.

Every command is bounded (`SOCKET_TIMEOUT`; blocking ones block for less), a broken
connection is made again by the client (`RETRIES`; an idle one is checked before use,
`HEALTH_CHECK`), and what fails is raised as `StoreFailed` with a redacted reason: no key,
so no session id, in any text this store raises or logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from .base import (
    MAX_ANSWER_BYTES,
    MAX_CANCEL_BYTES,
    MAX_EVENTS,
    SESSION_TTL,
    Abandoned,
    CallRecord,
    Gap,
    Lease,
    Position,
    SessionRecord,
    Stored,
    StoreFailed,
    StreamGone,
    StreamState,
    event_id,
    redacted,
)
from .live import LIVE_EVENTS, LiveTails

log = logging.getLogger("ssewire.mcp.gateway")

LEASE = 3.0  # seconds a writer's lease lasts; renewed every third of it
BLOCK_MS = 500  # a follower's longest wait for news before it checks the writer's lease
SOCKET_TIMEOUT = 2.0  # seconds one command may take; blocking ones block for less (BLOCK_MS, ANSWER_BLOCK)
CONNECT_TIMEOUT = 2.0  # seconds to (re)connect
HEALTH_CHECK = 5  # seconds a pooled connection may sit idle before it is PINGed at its next use
RETRIES = 2  # a command whose connection broke is sent again on a new one (after 50, then 100 ms)
ANSWER_BLOCK = 1.0  # seconds one BLPOP of an awaited answer blocks (the wait is a loop of them)
READ_DEADLINE = 5.0  # seconds a follower's reads may keep failing before it gives up (StoreFailed)
FAIL_WRITE = 10.0  # seconds a failed stream's error event may take to be stored (tried in the background)
FAILED_KEPT = 60.0  # seconds the error ending a failed stream is kept for followers here

# renew a lease while it is this process's; one that lapsed (Redis was away) is taken back
# unless the stream ended meanwhile; another's (the stream adopted) is not renewed: 0
RENEW = """
local held = redis.call('get', KEYS[1])
if redis.call('exists', KEYS[2]) == 0 then return -1 end
if held == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
if held or redis.call('hexists', KEYS[2], 'done') == 1 then
  return 0
end
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

# KEYS: meta, events, lease. ARGV: owner, lease ms, ttl ms, first seq (with a '*': or the
# next one, if the last write was this owner's: a failed stream's error, after a write given
# up that landed late), tag, final (0/1), position (JSON or ''), maxlen, then data, arrival
# for each event. 1: written already (the tag is there), 0: written, -1: the stream is
# gone, -2: written on by another, -3: another's lease
APPEND = """
if redis.call('hget', KEYS[1], 'last') == ARGV[5] then return 1 end
local following = tonumber(redis.call('hget', KEYS[1], 'next'))
if not following then return -1 end
local seq = tonumber((string.gsub(ARGV[4], '[*]', '')))
if following ~= seq and string.sub(ARGV[4], -1) == '*' then
  local last = redis.call('hget', KEYS[1], 'last') or ''
  if string.sub(last, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then seq = following end
end
if following ~= seq or redis.call('hexists', KEYS[1], 'done') == 1 then return -2 end
local held = redis.call('get', KEYS[3])
if held and held ~= ARGV[1] then return -3 end
for i = 9, #ARGV, 2 do
  redis.call('xadd', KEYS[2], 'MAXLEN', ARGV[8], '0-' .. seq, 'd', ARGV[i], 't', ARGV[i + 1])
  seq = seq + 1
end
redis.call('hset', KEYS[1], 'next', seq, 'last', ARGV[5])
if ARGV[7] ~= '' then redis.call('hset', KEYS[1], 'position', ARGV[7]) end
if ARGV[6] == '1' then
  redis.call('xadd', KEYS[2], '0-' .. seq, 'end', '1')
  redis.call('hset', KEYS[1], 'done', '1')
  redis.call('del', KEYS[3])
elseif not held then
  redis.call('set', KEYS[3], ARGV[1], 'PX', ARGV[2])
end
redis.call('pexpire', KEYS[1], ARGV[3])
redis.call('pexpire', KEYS[2], ARGV[3])
return 0
"""

# KEYS: the marker, the answer list. An answer is stored only while someone waits for it
# (the marker), once (the marker goes), for no longer than the wait
ANSWER = """
local left = redis.call('pttl', KEYS[1])
if left < 0 then return 0 end
redis.call('del', KEYS[1])
redis.call('rpush', KEYS[2], ARGV[1])
redis.call('pexpire', KEYS[2], left + 1000)
return 1
"""

# KEYS: the lease. ARGV: owner. The lease goes only while it is this owner's (a draining
# replica lets its streams go; one adopted meanwhile stays its adopter's)
RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""

# KEYS: the key set, then the session's fixed keys: every key it names and they go at once
# a token bucket, on Redis's clock (replicas' clocks may differ): (tokens, when) refilled
# at ARGV[1] a second up to ARGV[2]; one token taken, or the seconds until one is there
TAKE = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1000000
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local held = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(held[1]) or burst
local at = tonumber(held[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return tostring(wait)
"""

DROP = """
local named = redis.call('smembers', KEYS[1])
for i = 1, #named, 512 do
  redis.call('del', unpack(named, i, math.min(i + 511, #named)))
end
return redis.call('del', unpack(KEYS))
"""

_TRANSIENT = (RedisError, OSError)  # asyncio's TimeoutError is an OSError


@contextlib.contextmanager
def _failing(what: str, *secret: str) -> Iterator[None]:
    """Redis's errors as `StoreFailed`, with a redacted reason (and no traceback of theirs)."""
    try:
        yield
    except _TRANSIENT as failed:
        raise StoreFailed(f"{what}: {redacted(failed, *secret)}") from None


class RedisStore:
    """Sessions and streams shared by gateway replicas through Redis (asyncio client)."""

    def __init__(
        self,
        redis: Any,
        *,
        prefix: str = "ssewire:gw:",
        max_events: int = MAX_EVENTS,
        ttl: float = SESSION_TTL,
        lease: float = LEASE,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self.redis, self.prefix, self.max_events = redis, prefix, max_events
        self.ttl_ms = int(ttl * 1000)
        self.lease_ms = max(int(lease * 1000), 10)
        self.max_answer_bytes = max_answer_bytes
        self._next: dict[tuple[str, int], int] = {}  # the streams this process writes: their next seq
        self._leases: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._failed: dict[tuple[str, int], Stored] = {}  # streams whose writer here gave up: their end
        # the streams this process writes: their newest events, for its own followers
        self._live = LiveTails(max_events=min(LIVE_EVENTS, max_events))
        self._news = asyncio.Event()  # set (and replaced) when a stream fails here: its followers wake
        self._tasks: set[asyncio.Task[Any]] = set()  # the failed streams' error events being stored
        self._cancel_listeners: dict[str, list[Callable[[Any, Any], None]]] = {}
        self._listening: asyncio.Task[None] | None = None  # the one pattern subscription
        self.owner = secrets.token_hex(8)  # this process, as its leases name it
        self._append = redis.register_script(APPEND)
        self._renew_script = redis.register_script(RENEW)
        self._answer = redis.register_script(ANSWER)
        self._drop = redis.register_script(DROP)
        self._release = redis.register_script(RELEASE)
        self._take = redis.register_script(TAKE)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisStore:
        """A store on a Redis client with bounded timeouts that reconnects on its own."""
        import redis.asyncio
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialBackoff

        client = redis.asyncio.from_url(
            url,
            socket_timeout=SOCKET_TIMEOUT,
            socket_connect_timeout=CONNECT_TIMEOUT,
            health_check_interval=HEALTH_CHECK,
            retry=Retry(
                ExponentialBackoff(cap=0.1, base=0.05), RETRIES, supported_errors=(RedisConnectionError,)
            ),
            retry_on_error=[RedisConnectionError],
        )
        return cls(client, **options)

    def _key(self, kind: str, session: str, stream: int | None = None) -> str:
        return f"{self.prefix}{kind}:{session}" + ("" if stream is None else f":{stream}")

    # -- sessions ----------------------------------------------------------------------

    async def create(self, record: SessionRecord) -> None:
        with _failing("storing a session", record.ident):
            await self.redis.set(self._key("s", record.ident), json.dumps(record.to_dict()), px=self.ttl_ms)

    async def load(self, ident: str) -> SessionRecord | None:
        with _failing("loading a session", ident):
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.get(self._key("s", ident))
                for kind in ("s", "n", "k"):
                    pipe.pexpire(self._key(kind, ident), self.ttl_ms)
                found, *_ = await pipe.execute()
        return None if found is None else SessionRecord.from_dict(_json(found))

    async def update(self, record: SessionRecord) -> None:
        with _failing("updating a session", record.ident):
            await self.redis.set(
                self._key("s", record.ident), json.dumps(record.to_dict()), px=self.ttl_ms, xx=True
            )

    async def drop(self, ident: str) -> None:
        """Every key of the session, in one script: its record, counter and key set, and each
        key the set names (streams, metas, leases, answers and their markers)."""
        for key in [key for key in self._next if key[0] == ident]:
            self._stop_writing(*key)
        for key in [key for key in self._failed if key[0] == ident]:
            self._failed.pop(key, None)
        with _failing("dropping a session", ident):
            await self._drop(keys=[self._key("k", ident), self._key("s", ident), self._key("n", ident)])

    # -- streams -----------------------------------------------------------------------

    async def open_stream(self, session: str, call: CallRecord | None = None) -> int:
        with _failing("opening a stream", session):
            number = int(await self.redis.incr(self._key("n", session)))
            meta, events, lease = (self._key(kind, session, number) for kind in ("m", "e", "l"))
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hset(meta, mapping={"call": json.dumps(call.to_dict() if call else None), "next": 1})
                pipe.pexpire(meta, self.ttl_ms)
                pipe.sadd(self._key("k", session), meta, events, lease)
                pipe.pexpire(self._key("n", session), self.ttl_ms)
                pipe.pexpire(self._key("k", session), self.ttl_ms)
                pipe.set(lease, self.owner, px=self.lease_ms)
                await pipe.execute()
        self._write(session, number, 1)
        return number

    def _write(self, session: str, stream: int, seq: int) -> None:
        """This process writes the stream from ``seq`` on, under its lease."""
        self._next[(session, stream)] = seq
        self._leases[(session, stream)] = asyncio.ensure_future(self._renew(session, stream))
        self._live.start((session, stream), seq)

    async def _renew(self, session: str, stream: int) -> None:
        """Renew the lease while it is this process's; a lease found taken (this process
        stalled past it, and another adopted the stream) stops the writing here. Ends (is
        cancelled) when the stream is finished, failed, dropped, or the store closed."""
        keys = [self._key("l", session, stream), self._key("m", session, stream)]
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                with _failing("renewing a lease", session):
                    held = await asyncio.wait_for(
                        self._renew_script(keys=keys, args=[self.owner, self.lease_ms]), self.lease_ms / 3000
                    )
            except (StoreFailed, asyncio.TimeoutError) as failed:  # Redis away a moment: the lease may hold
                log.warning("renewing the lease of stream %s failed (%s)", stream, failed)
                continue
            if held == -1:  # the stream's keys are gone (a restart): its writer's next write says so
                self._leases.pop((session, stream), None)
                self._live.let_go((session, stream))  # (its followers here learn it from Redis)
                return
            if not held:
                log.error("stream %s was taken over by another replica: this one stops writing it", stream)
                self._next.pop((session, stream), None)
                self._leases.pop((session, stream), None)
                self._live.let_go((session, stream))
                return

    async def append(
        self,
        session: str,
        stream: int,
        items: list[tuple[bytes, float]],
        position: Position | None = None,
        *,
        final: bool = False,
    ) -> None:
        """Store events after the last this process stored (`APPEND`). Sent again after a
        failure (the same events), it stores nothing twice: `StoreFailed` may be retried;
        `Gap` may not (the stream is gone, or another replica writes it now)."""
        await self._stored(session, stream, items, position, final=final)

    async def _stored(
        self,
        session: str,
        stream: int,
        items: list[tuple[bytes, float]],
        position: Position | None = None,
        *,
        final: bool = False,
        failing: bool = False,
    ) -> None:
        seq = self._next.get((session, stream))
        if seq is None:
            raise Gap(f"stream {stream} is not written by this process (or no longer)")
        tag = f"{self.owner}:{'fail' if failing else seq}:{len(items)}:{int(final)}"
        args: list[Any] = [
            self.owner,
            self.lease_ms,
            self.ttl_ms,
            f"{seq}*" if failing else seq,
            tag,
            int(final),
            json.dumps(position.to_dict()) if position is not None else "",
            self.max_events,
        ]
        for data, arrived in items:
            args += (data, repr(arrived))
        keys = [self._key(kind, session, stream) for kind in ("m", "e", "l")]
        with _failing(f"storing events of stream {stream}", session):
            done = int(await self._append(keys=keys, args=args))
        if done == -1:  # its keys are gone (Redis restarted, or flushed): its followers must be told
            lease = self._leases.pop((session, stream), None)
            if lease is not None:
                lease.cancel()
            self._live.let_go((session, stream))
            raise StreamGone(f"stream {stream} is no longer kept")  # (still ours to `fail`)
        if done < 0:
            self._stop_writing(session, stream)
            raise Gap(f"stream {stream} was written by another replica")
        if not failing and (session, stream) in self._live.tails:  # stored: its followers here take them
            stored = [
                Stored(event_id(stream, seq + n), data, arrived) for n, (data, arrived) in enumerate(items)
            ]
            self._live.add((session, stream), seq, stored, final=final)
        if final:
            self._stop_writing(session, stream)
        else:
            self._next[(session, stream)] = seq + len(items)

    def _stop_writing(self, session: str, stream: int) -> int | None:
        lease = self._leases.pop((session, stream), None)
        if lease is not None:
            lease.cancel()
        self._live.let_go((session, stream))
        return self._next.pop((session, stream), None)

    async def finish(self, session: str, stream: int) -> None:
        if (session, stream) not in self._next:
            return  # ended already (with its last events), or not this process's to end
        try:
            await self.append(session, stream, [], final=True)
        except Gap:
            return

    async def fail(self, session: str, stream: int, event: bytes) -> None:
        """This process's writing of ``stream`` failed: its lease is let go at once, its
        followers here end with ``event`` (id: the next seq, as it would be stored), and
        ``event`` is stored as the stream's end if Redis takes it within `FAIL_WRITE`
        (tried in the background; never over another replica's writing: `APPEND`)."""
        seq = self._next.get((session, stream))
        lease = self._leases.pop((session, stream), None)
        if lease is not None:
            lease.cancel()  # no renewal from now on: another replica may adopt the stream
        if seq is None:
            return  # not written here (or no longer): its writer elsewhere ends it
        key = (session, stream)
        self._failed[key] = Stored(event_id(stream, seq), event, time.time())
        asyncio.get_running_loop().call_later(FAILED_KEPT, self._failed.pop, key, None)
        self._news.set()
        self._news = asyncio.Event()
        self._live.let_go((session, stream))  # its followers here wake to the failure
        task = asyncio.ensure_future(self._store_failure(session, stream, event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _store_failure(self, session: str, stream: int, event: bytes) -> None:
        deadline = time.monotonic() + FAIL_WRITE
        pause = 0.05
        try:
            while True:
                try:
                    writing = self._stored(session, stream, [(event, time.time())], final=True, failing=True)
                    await asyncio.wait_for(writing, 2.0)
                    return
                except Gap:
                    return  # adopted by another replica meanwhile, or dropped: its end is theirs
                except (StoreFailed, asyncio.TimeoutError) as failed:
                    if time.monotonic() + pause > deadline:
                        log.warning("the error ending stream %s could not be stored (%s)", stream, failed)
                        return
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
        finally:
            self._stop_writing(session, stream)

    async def release(self, session: str, stream: int) -> None:
        """Stop writing ``stream`` here, unfinished, and let its lease go (`RELEASE`): a
        follower at another replica finds it abandoned at its next look (`BLOCK_MS`)."""
        if self._stop_writing(session, stream) is None:
            return  # not written here (or no longer)
        with _failing("releasing a stream", session):
            await self._release(keys=[self._key("l", session, stream)], args=[self.owner])

    async def take(self, key: str, per_second: float, burst: int) -> float:
        """A token of the rate limit bucket ``key`` (`ssewire.mcp.server.rates`), shared by
        every replica: 0 when taken, else the seconds until one is there."""
        with _failing("taking a rate limit's token"):
            wait = await self._take(keys=[f"{self.prefix}r:{key}"], args=[repr(per_second), burst])
        return float(wait)

    async def ping(self) -> None:
        try:
            with _failing("pinging the store"):
                await asyncio.wait_for(self.redis.ping(), SOCKET_TIMEOUT)
        except asyncio.TimeoutError:  # (3.10: not an OSError)
            raise StoreFailed(f"pinging the store: no answer in {SOCKET_TIMEOUT:g} s") from None

    async def adopt(self, session: str, stream: int) -> Lease | None:
        """Take up an abandoned stream: its lease, or None if another replica took it
        first (or it ended meanwhile)."""
        with _failing("adopting a stream", session):
            taken = await self.redis.set(
                self._key("l", session, stream), self.owner, px=self.lease_ms, nx=True
            )
        state = await self.state(session, stream)
        if not taken or state is None or state.done:
            return None
        self._write(session, stream, state.next)
        return Lease(self.owner, session, stream, state.next)

    # -- answers to the server's requests ----------------------------------------------

    async def expect(
        self, session: str, ident: str, timeout: float, registered: asyncio.Future[None] | None = None
    ) -> dict[str, Any] | None:
        """The downstream answer to request ``ident``, posted at any replica; None after
        ``timeout`` seconds. While it waits, a marker says so (`answered` stores nothing
        without it; ``registered`` is set once it is stored); both go when it returns."""
        marker, box = self._key("w", session) + f":{ident}", self._key("a", session) + f":{ident}"
        keys = self._key("k", session)
        with _failing("awaiting an answer", session):
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.set(marker, self.owner, px=max(int(timeout * 1000), 10))
                pipe.sadd(keys, marker, box)
                pipe.pexpire(keys, self.ttl_ms)
                await pipe.execute()
        if registered is not None and not registered.done():
            registered.set_result(None)
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                try:
                    with _failing("awaiting an answer", session):
                        found = await self.redis.blpop([box], timeout=max(min(left, ANSWER_BLOCK), 0.01))
                except StoreFailed as failed:  # a blip: the wait goes on, bounded by its deadline
                    log.warning("awaiting an answer to a server's request: %s", failed)
                    await asyncio.sleep(min(0.2, max(left, 0)))
                    continue
                if found:
                    answer = _json(found[1])
                    return answer if isinstance(answer, dict) else None
        finally:
            with contextlib.suppress(Exception):  # best effort: both expire by themselves anyway
                async with self.redis.pipeline(transaction=False) as pipe:
                    pipe.delete(marker, box)
                    pipe.srem(keys, marker, box)
                    await asyncio.wait_for(pipe.execute(), SOCKET_TIMEOUT)

    async def answered(self, session: str, message: dict[str, Any]) -> bool:
        """Store a downstream answer for the replica that `expect`s it; False, and nothing
        stored, when no one waits for that id (or it came already), or it is larger than
        ``max_answer_bytes``."""
        ident = message.get("id")
        if not isinstance(ident, str):
            return False  # the gateway's requests have string ids: no one waits for this
        payload = json.dumps(message)
        if len(payload) > self.max_answer_bytes:
            log.warning(
                "an answer to a server's request of %d bytes was refused (at most %d)",
                len(payload),
                self.max_answer_bytes,
            )
            return False
        keys = [self._key("w", session) + f":{ident}", self._key("a", session) + f":{ident}"]
        with _failing("storing an answer", session, ident):
            return bool(await self._answer(keys=keys, args=[payload]))

    # -- cancellations -----------------------------------------------------------------

    async def cancel(self, session: str, request: Any, reason: Any = None) -> None:
        """Publish a downstream cancellation to every replica (channel ``c:<session>``)."""
        if not isinstance(request, (str, int)) or isinstance(request, bool):
            return
        said = {"id": request, "reason": reason if isinstance(reason, str) else None}
        payload = json.dumps(said)
        if len(payload) > MAX_CANCEL_BYTES:
            payload = json.dumps({"id": request, "reason": None})
        if len(payload) > MAX_CANCEL_BYTES:
            return
        with _failing("publishing a cancellation", session):
            await self.redis.publish(self._key("c", session), payload)

    def listen_cancels(self, session: str, heard: Callable[[Any, Any], None]) -> Callable[[], None]:
        listeners = self._cancel_listeners.setdefault(session, [])
        listeners.append(heard)
        if self._listening is None or self._listening.done():
            self._listening = asyncio.ensure_future(self._listen())

        def stop() -> None:
            if heard in listeners:
                listeners.remove(heard)
            if not listeners and self._cancel_listeners.get(session) is listeners:
                del self._cancel_listeners[session]
            if not self._cancel_listeners and self._listening is not None:
                self._listening.cancel()  # no relay listens: no subscription held
                self._listening = None

        return stop

    async def _listen(self) -> None:
        """One pattern subscription for the cancellations of every session, resubscribed
        after Redis comes back; each heard goes to the listeners of its session here."""
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in self._key("c", "")) + "*"
        pause = 0.05
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await asyncio.wait_for(pubsub.psubscribe(pattern), SOCKET_TIMEOUT)
                pause = 0.05
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None:
                        self._heard(message)
            except _TRANSIENT as failed:
                log.warning("listening for cancellations: %s", redacted(failed))
            finally:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pubsub.aclose(), SOCKET_TIMEOUT)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 2.0)

    def _heard(self, message: Any) -> None:
        if not isinstance(message, dict) or message.get("type") != "pmessage":
            return
        channel, data = message.get("channel"), message.get("data")
        if isinstance(channel, bytes):
            channel = channel.decode(errors="replace")
        if not isinstance(channel, str) or not isinstance(data, (bytes, str)) or len(data) > MAX_CANCEL_BYTES:
            return
        session = channel[len(self._key("c", "")) :]
        said = _json(data)
        if not isinstance(said, dict) or not isinstance(said.get("id"), (str, int)):
            return
        for heard in list(self._cancel_listeners.get(session, ())):
            try:
                heard(said["id"], said.get("reason"))
            except Exception:  # one listener's bug never stops the others
                log.exception("a cancellation listener raised")

    # -- reading -----------------------------------------------------------------------

    async def state(self, session: str, stream: int) -> StreamState | None:
        with _failing(f"reading stream {stream}", session):
            meta = await self.redis.hgetall(self._key("m", session, stream))
            if not meta:
                return None
            fields = {k.decode(): v.decode() for k, v in meta.items()}
            following = fields.get("next", "")
            if not (following.isascii() and following.isdigit()):
                return None  # not a stream this store wrote
            first = await self.redis.xrange(self._key("e", session, stream), count=1)
        evicted = _seq(first[0][0]) - 1 if first else int(following) - 1
        return StreamState(
            CallRecord.from_dict(_json(fields.get("call", "null"))),
            "done" in fields,
            int(following),
            evicted,
            Position.from_dict(_json(fields["position"])) if "position" in fields else None,
        )

    async def follow(self, session: str, stream: int, after: int) -> AsyncIterator[list[Stored]]:
        """The events after ``after`` as they are stored, until the stream ends; a stream
        that failed here ends with its error event at once (`fail`), Redis answering or not.
        Events this process stored come from its own tail (`LiveTail`) once the follower is
        within it, never read back; the others from Redis. Reads that fail are tried again
        for `READ_DEADLINE` seconds, then `StoreFailed`."""
        events, key = self._key("e", session, stream), (session, stream)
        state = await self.state(session, stream)
        if (state is None or state.next <= after) and key not in self._failed:
            raise Gap(f"stream {stream} is not kept, or never reached event {after}")
        sent = after
        reading: asyncio.Task[Any] | None = None
        troubled: float | None = None  # since when reads fail
        try:
            while True:
                failed = self._failed.get(key)
                if failed is not None:
                    if reading is not None:
                        reading.cancel()
                        reading = None
                    if _seq(failed.event_id) > sent:  # (a reader resuming after it gets nothing more)
                        yield [*await self._tail(session, stream, sent, failed), failed]
                    return
                tail = self._live.get(key)
                if tail is not None and tail.reaches(sent):
                    if reading is not None:  # (begun before it was within the tail)
                        reading.cancel()
                        reading = None
                    batch: list[Stored] = tail.after(sent)
                    if batch:
                        sent = _seq(batch[-1].event_id)
                        yield batch
                    elif tail.ended:
                        return
                    else:
                        await tail.changed.wait()
                    continue
                if reading is None:
                    reading = asyncio.ensure_future(
                        self.redis.xread({events: f"0-{sent}"}, count=512, block=BLOCK_MS)
                    )
                news = asyncio.ensure_future(self._news.wait())
                await asyncio.wait({reading, news}, return_when=asyncio.FIRST_COMPLETED)
                news.cancel()
                if not reading.done():
                    continue  # another stream failed, or this one: looked at above
                done, reading = reading, None
                try:
                    with _failing(f"reading stream {stream}", session):
                        read = done.result()
                        entries = read[0][1] if read else []
                        lost = not entries and not await self.redis.exists(self._key("l", session, stream))
                except StoreFailed as trouble:
                    now = time.monotonic()
                    troubled = now if troubled is None else troubled
                    if now - troubled > READ_DEADLINE:
                        raise
                    log.warning("reading stream %s failed, trying again (%s)", stream, trouble)
                    await asyncio.sleep(0.1)
                    continue
                troubled = None
                if not entries:
                    if lost and key not in self._failed:
                        state = await self.state(session, stream)
                        if state is None:  # its keys are gone (a restart): never wait on it
                            raise Gap(f"stream {stream} is no longer kept")
                        if not state.done:
                            raise Abandoned(state.call)
                    continue
                if _seq(entries[0][0]) != sent + 1:
                    raise Gap(f"events after {sent} of stream {stream} were evicted before they were sent")
                batch = []
                ended = False
                for entry, fields in entries:
                    if b"end" in fields:
                        ended = True
                        break
                    sent = _seq(entry)
                    batch.append(Stored(event_id(stream, sent), fields[b"d"], float(fields[b"t"])))
                if batch:
                    yield batch
                if ended:
                    return
        finally:
            if reading is not None:
                reading.cancel()

    async def _tail(self, session: str, stream: int, sent: int, failed: Stored) -> list[Stored]:
        """What was stored between ``sent`` and the error ending a failed stream, if Redis
        gives it at once (a stalled one does not: the error comes without it)."""
        end = _seq(failed.event_id) - 1
        if end <= sent:
            return []
        try:
            with _failing(f"reading stream {stream}", session):
                entries = await asyncio.wait_for(
                    self.redis.xrange(self._key("e", session, stream), f"0-{sent + 1}", f"0-{end}"), 1.0
                )
        except (StoreFailed, asyncio.TimeoutError):
            return []
        if not entries or _seq(entries[0][0]) != sent + 1:
            return []
        return [
            Stored(event_id(stream, _seq(entry)), fields[b"d"], float(fields[b"t"]))
            for entry, fields in entries
            if b"d" in fields
        ]

    async def aclose(self) -> None:
        tasks = [*self._leases.values(), *self._tasks, *([self._listening] if self._listening else [])]
        for task in tasks:
            task.cancel()
        self._leases.clear()
        self._listening = None
        self._live.clear()  # (its followers here wake, and find the store closed)
        if tasks:
            await asyncio.wait(tasks, timeout=SOCKET_TIMEOUT)
        await self.redis.aclose()


def _json(raw: bytes | str) -> Any:
    """A JSON value the store holds; None for anything else (a store is a peer too)."""
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _seq(entry: bytes | str) -> int:
    text = entry.decode() if isinstance(entry, bytes) else entry
    return int(text.partition("-")[2])
