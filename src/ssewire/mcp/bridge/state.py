"""The bridge's ``requestState``: what a stateless client echoes back to continue a call
that the bridge holds open upstream (a session's call waiting on the answers to its
server-to-client requests).

A sealed state is ``base64url(payload) "." base64url(HMAC-SHA256(key, payload))`` with a
key drawn per process: a client can read it (it says nothing secret: a random handle, the
call's method and name, a deadline) but not forge or alter it, and a state minted by
another process (or before a restart) never verifies, so it is refused rather than
guessed at. Every state has a lifetime and a size bound; a state is checked (size, then
signature, in constant time, then the JSON) before anything in it is believed."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any

import orjson

MAX_STATE_SIZE = 2048  # characters of a requestState taken at all: ours are ~300


class BadState(Exception):
    """A requestState that is not one this process sealed, or no longer valid (the text
    says which, without echoing the state)."""


@dataclass(frozen=True)
class State:
    handle: str  # the parked call's key in the bridge
    owner: str  # a digest of who made the call (principal and client identity)
    method: str
    name: str | None  # the tool or prompt name, the resource URI: the retry must repeat it
    round: int
    expires: float  # time.time() past which the state is refused


class Sealer:
    """Seals and opens states with a key of this process (or ``key``, for tests)."""

    def __init__(self, *, key: bytes | None = None, lifetime: float = 300.0) -> None:
        self._key = key or secrets.token_bytes(32)
        self.lifetime = lifetime

    def seal(self, handle: str, owner: str, method: str, name: str | None, round_: int) -> str:
        payload = orjson.dumps(
            {"h": handle, "o": owner, "m": method, "n": name, "r": round_, "e": time.time() + self.lifetime}
        )
        mac = hmac.new(self._key, payload, hashlib.sha256).digest()
        return f"{_b64(payload)}.{_b64(mac)}"

    def open(self, token: Any) -> State:
        if not isinstance(token, str):
            raise BadState("requestState must be a string")
        if len(token) > MAX_STATE_SIZE:
            raise BadState(f"requestState is over {MAX_STATE_SIZE} characters")
        head, dot, tail = token.partition(".")
        if not dot:
            raise BadState("requestState is not one this bridge issued")
        try:
            payload, mac = _unb64(head), _unb64(tail)
        except (binascii.Error, ValueError):
            raise BadState("requestState is not one this bridge issued") from None
        if not hmac.compare_digest(mac, hmac.new(self._key, payload, hashlib.sha256).digest()):
            raise BadState("requestState is not one this bridge issued (or this bridge restarted)")
        fields = orjson.loads(payload)  # ours: it parses
        if not time.time() < fields["e"]:
            raise BadState("requestState has expired")
        return State(fields["h"], fields["o"], fields["m"], fields["n"], fields["r"], fields["e"])


def owner_digest(*parts: Any) -> str:
    """A short digest naming who makes a call, for a state to be bound to."""
    return hashlib.sha256(orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not text.isascii():
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
