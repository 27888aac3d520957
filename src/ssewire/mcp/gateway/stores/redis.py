"""The store of gateway replicas: sessions and streams in Redis, so any replica can relay a
session and replay a stream another one wrote (``pip install 'ssewire[redis]'``).

Keys, under ``prefix`` (``ssewire:gw:`` by default), each expiring ``ttl`` seconds after
the session's last use:

- ``s:<session>``: the session record (JSON); ``n:<session>``: its stream counter;
  ``k:<session>``: the keys of its streams (to drop them with it);
- ``e:<session>:<stream>``: a Redis stream, one entry per event, entry id ``0-<seq>`` (so
  ``Last-Event-ID`` maps to an entry), at most ``max_events`` kept; a last entry ``end``
  finishes it;
- ``m:<session>:<stream>``: what the stream answers and its next seq;
- ``l:<session>:<stream>``: the writer's lease (its owner's token), renewed while it
  writes and only while it is still its own. A follower that finds the stream unfinished
  and the lease gone learns its writer died (`Abandoned`);
- ``a:<session>:<request>``: a downstream answer to a server's request, for the replica
  that asked.

Appends are one transaction (the entries, the next seq and the upstream position
together; a stream's last events with its end), so a replica killed mid-write leaves a
stream that ends at a whole event, and never one answered but open.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator
from typing import Any

from .base import (
    MAX_EVENTS,
    SESSION_TTL,
    Abandoned,
    CallRecord,
    Gap,
    Lease,
    Position,
    SessionRecord,
    Stored,
    StreamState,
    event_id,
)

log = logging.getLogger("ssewire.mcp.gateway")

LEASE = 3.0  # seconds a writer's lease lasts; renewed every third of it
# renew a lease only while it is still this process's (another may have adopted the stream)
RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
BLOCK_MS = 500  # a follower's longest wait for news before it checks the writer's lease


class RedisStore:
    """Sessions and streams shared by gateway replicas through Redis (asyncio client)."""

    def __init__(
        self,
        redis: Any,
        *,
        prefix: str = "ssewire:gw:",
        max_events: int = MAX_EVENTS,
        ttl: float = SESSION_TTL,
    ) -> None:
        self.redis, self.prefix, self.max_events = redis, prefix, max_events
        self.ttl_ms = int(ttl * 1000)
        self._next: dict[tuple[str, int], int] = {}  # the streams this process writes: their next seq
        self._leases: dict[tuple[str, int], asyncio.Task[None]] = {}
        self.owner = secrets.token_hex(8)  # this process, as its leases name it

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisStore:
        import redis.asyncio

        return cls(redis.asyncio.from_url(url), **options)

    def _key(self, kind: str, session: str, stream: int | None = None) -> str:
        return f"{self.prefix}{kind}:{session}" + ("" if stream is None else f":{stream}")

    # -- sessions ----------------------------------------------------------------------

    async def create(self, record: SessionRecord) -> None:
        await self.redis.set(self._key("s", record.ident), json.dumps(record.to_dict()), px=self.ttl_ms)

    async def load(self, ident: str) -> SessionRecord | None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.get(self._key("s", ident))
            for kind in ("s", "n", "k"):
                pipe.pexpire(self._key(kind, ident), self.ttl_ms)
            found, *_ = await pipe.execute()
        return None if found is None else SessionRecord.from_dict(_json(found))

    async def update(self, record: SessionRecord) -> None:
        await self.redis.set(
            self._key("s", record.ident), json.dumps(record.to_dict()), px=self.ttl_ms, xx=True
        )

    async def drop(self, ident: str) -> None:
        keys = [
            key.decode() if isinstance(key, bytes) else key
            for key in await self.redis.smembers(self._key("k", ident))
        ]
        await self.redis.delete(self._key("s", ident), self._key("n", ident), self._key("k", ident), *keys)

    # -- streams -----------------------------------------------------------------------

    async def open_stream(self, session: str, call: CallRecord | None = None) -> int:
        number = int(await self.redis.incr(self._key("n", session)))
        meta, events, lease = (self._key(kind, session, number) for kind in ("m", "e", "l"))
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(meta, mapping={"call": json.dumps(call.to_dict() if call else None), "next": 1})
            pipe.pexpire(meta, self.ttl_ms)
            pipe.sadd(self._key("k", session), meta, events, lease)
            pipe.pexpire(self._key("n", session), self.ttl_ms)
            pipe.pexpire(self._key("k", session), self.ttl_ms)
            pipe.set(lease, self.owner, px=int(LEASE * 1000))
            await pipe.execute()
        self._write(session, number, 1)
        return number

    def _write(self, session: str, stream: int, seq: int) -> None:
        """This process writes the stream from ``seq`` on, under its lease."""
        self._next[(session, stream)] = seq
        self._leases[(session, stream)] = asyncio.ensure_future(self._renew(session, stream))

    async def _renew(self, session: str, stream: int) -> None:
        """Renew the lease while it is this process's; a lease found taken (this process
        stalled past it, and another adopted the stream) stops the writing here."""
        lease = self._key("l", session, stream)
        while True:
            await asyncio.sleep(LEASE / 3)
            try:
                held = await self.redis.eval(RENEW, 1, lease, self.owner, int(LEASE * 1000))
            except Exception:  # Redis unreachable for a moment: try again, the lease may hold
                log.warning("renewing the lease of stream %s failed", stream, exc_info=True)
                continue
            if not held:
                log.error("stream %s was taken over by another replica: this one stops writing it", stream)
                self._next.pop((session, stream), None)
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
        seq = self._next.get((session, stream))
        if seq is None:
            raise Gap(f"stream {stream} is not written by this process (or no longer)")
        meta, events = self._key("m", session, stream), self._key("e", session, stream)
        async with self.redis.pipeline(transaction=True) as pipe:
            for data, arrived in items:
                pipe.xadd(
                    events,
                    {"d": data, "t": repr(arrived)},
                    id=f"0-{seq}",
                    maxlen=self.max_events,
                    approximate=False,
                )
                seq += 1
            pipe.hset(meta, "next", seq)
            if position is not None:  # in the same transaction: a taker never resumes past what is stored
                pipe.hset(meta, "position", json.dumps(position.to_dict()))
            if final:  # the answer and the end together: a taker never finds an answered stream open
                self._ending(pipe, session, stream, seq)
            pipe.pexpire(meta, self.ttl_ms)
            pipe.pexpire(events, self.ttl_ms)
            await pipe.execute()
        if final:
            self._stop_writing(session, stream)
        else:
            self._next[(session, stream)] = seq

    def _ending(self, pipe: Any, session: str, stream: int, seq: int) -> None:
        pipe.xadd(self._key("e", session, stream), {"end": b"1"}, id=f"0-{seq}")
        pipe.hset(self._key("m", session, stream), "done", 1)
        pipe.delete(self._key("l", session, stream))

    def _stop_writing(self, session: str, stream: int) -> int | None:
        lease = self._leases.pop((session, stream), None)
        if lease is not None:
            lease.cancel()
        return self._next.pop((session, stream), None)

    async def finish(self, session: str, stream: int) -> None:
        seq = self._stop_writing(session, stream)
        if seq is None:
            return  # ended already (with its last events), or not this process's to end
        meta, events = self._key("m", session, stream), self._key("e", session, stream)
        async with self.redis.pipeline(transaction=True) as pipe:
            self._ending(pipe, session, stream, seq)
            pipe.pexpire(meta, self.ttl_ms)
            pipe.pexpire(events, self.ttl_ms)
            await pipe.execute()

    async def adopt(self, session: str, stream: int) -> Lease | None:
        """Take up an abandoned stream: its lease, or None if another replica took it
        first (or it ended meanwhile)."""
        taken = await self.redis.set(
            self._key("l", session, stream), self.owner, px=int(LEASE * 1000), nx=True
        )
        state = await self.state(session, stream)
        if not taken or state is None or state.done:
            return None
        self._write(session, stream, state.next)
        return Lease(self.owner, session, stream, state.next)

    async def expect(self, session: str, ident: str, timeout: float) -> dict[str, Any] | None:
        """The downstream answer to request ``ident``, posted at any replica (a list
        ``a:<session>:<ident>`` it is pushed on); None after ``timeout`` seconds."""
        found = await self.redis.blpop([self._key("a", session) + f":{ident}"], timeout=max(timeout, 0.01))
        answer = _json(found[1]) if found else None
        return answer if isinstance(answer, dict) else None

    async def answered(self, session: str, message: dict[str, Any]) -> None:
        ident = message.get("id")
        if not isinstance(ident, str):
            return  # the gateway's requests have string ids: no one waits for this
        key = self._key("a", session) + f":{ident}"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.rpush(key, json.dumps(message))
            pipe.pexpire(key, self.ttl_ms)  # an answer no one takes goes with the session
            await pipe.execute()

    async def state(self, session: str, stream: int) -> StreamState | None:
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
        events = self._key("e", session, stream)
        state = await self.state(session, stream)
        if state is None or state.next <= after:
            raise Gap(f"stream {stream} is not kept, or never reached event {after}")
        sent = after
        while True:
            # one round trip a batch: XREAD answers at once when entries are there, else waits
            read = await self.redis.xread({events: f"0-{sent}"}, count=512, block=BLOCK_MS)
            entries = read[0][1] if read else []
            if not entries:
                if not await self.redis.exists(self._key("l", session, stream)):
                    state = await self.state(session, stream)
                    if state is not None and not state.done:
                        raise Abandoned(state.call)
                continue
            if _seq(entries[0][0]) != sent + 1:
                raise Gap(f"events after {sent} of stream {stream} were evicted before they were sent")
            batch: list[Stored] = []
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

    async def aclose(self) -> None:
        for task in self._leases.values():
            task.cancel()
        self._leases.clear()
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
