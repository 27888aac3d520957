"""What the client raises: the server's JSON-RPC errors, a stream lost for good, credentials
refused, a deadline passed, an input-required result it cannot satisfy."""

from __future__ import annotations

import asyncio
import math
from typing import Any, NamedTuple

import httpx

from ..protocol.retry import retry_after
from ..streams.guard import UnsafeResumption
from ..transport.http import MessageTooLarge


class RPCError(Exception):
    """The server answered a request with a JSON-RPC error (``status``: the HTTP status of
    the answer it came in, when the session's opening was refused with one of 400 or more;
    ``retry_after``: that answer's ``Retry-After``, as it came)."""

    def __init__(
        self, error: dict[str, Any], *, status: int | None = None, retry_after: str | None = None
    ) -> None:
        self.code = error.get("code")
        self.error = error
        self.status, self.retry_after = status, retry_after
        super().__init__(f"JSON-RPC error {self.code}: {error.get('message')}")


class StreamBroken(Exception):
    """A stream broke, and neither resumption nor a re-issue is safe: report the failure."""


class ConnectFailed(StreamBroken):
    """The server could not be connected to: nothing of the request was sent (safe to try
    again later)."""


class Unauthorized(httpx.HTTPStatusError):
    """The server refused the client's credentials (401) or their scope (403): ``challenge``
    is its ``WWW-Authenticate`` header (what it asks for), or None. An HTTP status error
    as any other, with the challenge read out."""

    def __init__(self, response: httpx.Response) -> None:
        self.status, self.challenge = response.status_code, response.headers.get("www-authenticate")
        said = f": {self.challenge}" if self.challenge else " (no WWW-Authenticate challenge)"
        text = f"the server refused the credentials ({self.status}){said}"
        super().__init__(text, request=response.request, response=response)


class RequestTimeout(asyncio.TimeoutError):
    """A request got no answer within its deadline (resumptions included)."""

    def __init__(self, method: str, seconds: float) -> None:
        super().__init__(
            f"{method} got no answer within its {seconds:g} s deadline: it may still be running "
            "on the server; raise timeout= for slow work, or check its effects before sending it again"
        )
        self.method, self.seconds = method, seconds


class InputRequired(Exception):
    """A 2026-07-28 request answered with an input-required result that the client cannot
    satisfy: no handler for an input request, or more rounds than ``max_input_rounds``.
    ``result`` is the last input-required result."""

    def __init__(self, message: str, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.result = result


def failure_kind(failed: BaseException) -> str | None:
    """What a request's failure was, as the gateway names it in ``data.gateway``: the answer
    too large, unsafe to resume, credentials refused, the deadline passed, or the upstream
    failed (its stream broke, an HTTP error, a JSON-RPC error of the session); None for
    anything else (a fault of the caller's own)."""
    if isinstance(failed, MessageTooLarge):
        return "too-large"
    if isinstance(failed, UnsafeResumption):
        return "unsafe-resumption"
    if isinstance(failed, Unauthorized):
        return "upstream-unauthorized"
    if isinstance(failed, RequestTimeout):
        return "timeout"
    if isinstance(failed, (StreamBroken, httpx.HTTPError, RPCError)):
        return "upstream"
    return None


# seconds: the longest wait an upstream's Retry-After is told on as (a hostile or confused
# upstream cannot send a route's clients away for long; a stdio server's backoff is 30 s)
MAX_RETRY_AFTER = 60


def unavailable(failed: BaseException) -> str | None:
    """When an upstream that answered 503 (it cannot serve now: a stdio server that cannot
    start, an upstream overloaded), whatever its body, asks to be tried again: whole seconds
    for a ``Retry-After`` to pass on (1 when it said nothing readable, at most
    `MAX_RETRY_AFTER`); None for any other failure."""
    if isinstance(failed, httpx.HTTPStatusError) and failed.response.status_code == 503:
        said = failed.response.headers.get("retry-after")
    elif isinstance(failed, RPCError) and failed.status == 503:
        said = failed.retry_after
    else:
        return None
    seconds = retry_after(said)
    return str(min(MAX_RETRY_AFTER, max(1, math.ceil(seconds or 0))))


class OpenRefused(NamedTuple):
    """How a front (the gateway, the bridge) answers its client when its upstream did not
    open a session: with ``status``; with a ``Retry-After`` of ``retry_after`` seconds when
    the upstream asked to be tried again; with the upstream's own JSON-RPC ``error`` when
    it refused with one (passed on as it came), else with an error of the front's own."""

    status: int
    retry_after: str | None
    error: dict[str, Any] | None

    @property
    def headers(self) -> tuple[tuple[str, str], ...]:
        return (("retry-after", self.retry_after),) if self.retry_after is not None else ()


def open_refused(failed: Exception) -> OpenRefused:
    """The one rule for a session the upstream did not open (``failed``): its own refusal
    passes on, 200 (503 when it asked to be tried again: so is ours, and when to come
    back); any other failure is 503 when the upstream cannot serve now and said when to
    come back, else 502."""
    later = unavailable(failed)
    if isinstance(failed, RPCError):
        return OpenRefused(200 if later is None else 503, later, failed.error)
    return OpenRefused(502 if later is None else 503, later, None)
