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
- ``l:<session>:<stream>``: the writer's lease, renewed while it writes. A follower that
  finds the stream unfinished and the lease gone learns its writer died (`Abandoned`).

Appends are one transaction (the entries and the next seq together), so a replica killed
mid-write leaves a stream that ends at a whole event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from .stores import MAX_EVENTS, SESSION_TTL, Abandoned, Gap, SessionRecord, Stored, event_id

LEASE = 3.0  # seconds a writer's lease lasts; renewed every third of it
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

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisStore:
        import redis.asyncio

        return cls(redis.asyncio.from_url(url), **options)

    def _key(self, kind: str, session: str, stream: int | None = None) -> str:
        return f"{self.prefix}{kind}:{session}" + ("" if stream is None else f":{stream}")

    # -- sessions ----------------------------------------------------------------------

    async def create(self, record: SessionRecord) -> None:
        await self.redis.set(self._key("s", record.ident), json.dumps(record.__dict__), px=self.ttl_ms)

    async def load(self, ident: str) -> SessionRecord | None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.get(self._key("s", ident))
            for kind in ("s", "n", "k"):
                pipe.pexpire(self._key(kind, ident), self.ttl_ms)
            found, *_ = await pipe.execute()
        if found is None:
            return None
        return SessionRecord(**json.loads(found))

    async def update(self, record: SessionRecord) -> None:
        await self.redis.set(
            self._key("s", record.ident), json.dumps(record.__dict__), px=self.ttl_ms, xx=True
        )

    async def drop(self, ident: str) -> None:
        keys = [
            key.decode() if isinstance(key, bytes) else key
            for key in await self.redis.smembers(self._key("k", ident))
        ]
        await self.redis.delete(self._key("s", ident), self._key("n", ident), self._key("k", ident), *keys)

    # -- streams -----------------------------------------------------------------------

    async def open_stream(self, session: str, call: dict[str, Any] | None = None) -> int:
        number = int(await self.redis.incr(self._key("n", session)))
        meta, events, lease = (self._key(kind, session, number) for kind in ("m", "e", "l"))
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(meta, mapping={"call": json.dumps(call), "next": 1})
            pipe.pexpire(meta, self.ttl_ms)
            pipe.sadd(self._key("k", session), meta, events, lease)
            pipe.pexpire(self._key("n", session), self.ttl_ms)
            pipe.pexpire(self._key("k", session), self.ttl_ms)
            pipe.set(lease, "1", px=int(LEASE * 1000))
            await pipe.execute()
        self._next[(session, number)] = 1
        self._leases[(session, number)] = asyncio.ensure_future(self._renew(lease))
        return number

    async def _renew(self, lease: str) -> None:
        while True:
            await asyncio.sleep(LEASE / 3)
            await self.redis.set(lease, "1", px=int(LEASE * 1000))

    async def append(
        self,
        session: str,
        stream: int,
        items: list[tuple[bytes, float]],
        position: dict[str, Any] | None = None,
    ) -> None:
        seq = self._next.get((session, stream))
        if seq is None:
            raise Gap(f"stream {stream} is not written by this process")
        events = self._key("e", session, stream)
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
            pipe.hset(self._key("m", session, stream), "next", seq)
            if position is not None:  # in the same transaction: a taker never resumes past what is stored
                pipe.hset(self._key("m", session, stream), "position", json.dumps(position))
            pipe.pexpire(events, self.ttl_ms)
            await pipe.execute()
        self._next[(session, stream)] = seq

    async def finish(self, session: str, stream: int) -> None:
        seq = self._next.pop((session, stream), None)
        lease = self._leases.pop((session, stream), None)
        if lease is not None:
            lease.cancel()
        await self._end(session, stream, seq)

    async def _end(self, session: str, stream: int, seq: int | None) -> None:
        if seq is None:
            seq = int(await self.redis.hget(self._key("m", session, stream), "next") or 1)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.xadd(self._key("e", session, stream), {"end": b"1"}, id=f"0-{seq}")
            pipe.hset(self._key("m", session, stream), "done", 1)
            pipe.delete(self._key("l", session, stream))
            await pipe.execute()

    async def adopt(self, session: str, stream: int) -> int | None:
        """Take up an abandoned stream to end it: its next seq, or None if another
        replica took it first (or it ended meanwhile)."""
        taken = await self.redis.set(
            self._key("l", session, stream), "adopted", px=int(LEASE * 1000), nx=True
        )
        state = await self.state(session, stream)
        if not taken or state is None or state["done"]:
            return None
        self._next[(session, stream)] = int(state["next"])
        self._leases[(session, stream)] = asyncio.ensure_future(self._renew(self._key("l", session, stream)))
        return int(state["next"])

    async def expect(self, session: str, ident: str, timeout: float) -> dict[str, Any] | None:
        """The downstream answer to request ``ident``, posted at any replica (a list
        ``a:<session>:<ident>`` it is pushed on); None after ``timeout`` seconds."""
        found = await self.redis.blpop([self._key("a", session) + f":{ident}"], timeout=max(timeout, 0.01))
        return json.loads(found[1]) if found else None

    async def answered(self, session: str, message: dict[str, Any]) -> None:
        ident = message.get("id")
        if not isinstance(ident, str):
            return  # the gateway's requests have string ids: no one waits for this
        key = self._key("a", session) + f":{ident}"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.rpush(key, json.dumps(message))
            pipe.pexpire(key, self.ttl_ms)  # an answer no one takes goes with the session
            await pipe.execute()

    async def state(self, session: str, stream: int) -> dict[str, Any] | None:
        meta = await self.redis.hgetall(self._key("m", session, stream))
        if not meta:
            return None
        fields = {k.decode(): v.decode() for k, v in meta.items()}
        first = await self.redis.xrange(self._key("e", session, stream), count=1)
        following = int(fields["next"])
        evicted = _seq(first[0][0]) - 1 if first else following - 1
        return {
            "call": json.loads(fields["call"]),
            "done": "done" in fields,
            "next": following,
            "evicted": evicted,
            "position": json.loads(fields["position"]) if "position" in fields else None,
        }

    async def follow(self, session: str, stream: int, after: int) -> AsyncIterator[list[Stored]]:
        events = self._key("e", session, stream)
        state = await self.state(session, stream)
        if state is None or state["next"] <= after:
            raise Gap(f"stream {stream} is not kept, or never reached event {after}")
        sent = after
        while True:
            entries = await self.redis.xrange(events, min=f"(0-{sent}", count=512)
            if not entries:
                read = await self.redis.xread({events: f"0-{sent}"}, count=512, block=BLOCK_MS)
                entries = read[0][1] if read else []
            if not entries:
                if not await self.redis.exists(self._key("l", session, stream)):
                    state = await self.state(session, stream)
                    if state is not None and not state["done"]:
                        raise Abandoned(state["call"])
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


def _seq(entry: bytes | str) -> int:
    text = entry.decode() if isinstance(entry, bytes) else entry
    return int(text.partition("-")[2])
