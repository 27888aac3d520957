"""The authentication users already have, as they have it: an ``httpx.Auth`` (authlib's
OAuth2 client, ``httpx.BasicAuth``...) goes to httpx as it is; an auth flow written for a
fork of httpx with the same ``Auth`` protocol (``httpx2.Auth``: the official MCP SDK's
``OAuthClientProvider``) is driven here, its requests and responses translated one by one.

No OAuth is written here: the flow decides everything (discovery, registration, tokens,
step-up); this only carries its requests over the client's own httpx connections, with the
client's deadlines, and hands it each response, its body read within a bound."""

from __future__ import annotations

import importlib
from collections.abc import AsyncGenerator
from typing import Any

import httpx

MAX_AUTH_BODY = 1024 * 1024  # bytes of an authorization server's answer (metadata, token) read
MAX_FLOW_STEPS = 64  # requests one authentication may make: a flow that loops is stopped


def adapted(auth: Any) -> httpx.Auth | tuple[str, str] | None:
    """``auth`` as httpx takes it: an ``httpx.Auth``, a (user, password) pair or None as
    given; an object of another httpx-like library's ``Auth`` (an ``async_auth_flow``)
    wrapped in `ForeignAuth`; anything else a TypeError."""
    if auth is None or isinstance(auth, (httpx.Auth, tuple)):
        return auth
    if callable(getattr(auth, "async_auth_flow", None)) and _library(auth) is not None:
        return ForeignAuth(auth)
    raise TypeError(
        f"auth must be an httpx.Auth, an httpx2.Auth (such as the MCP SDK's OAuthClientProvider) "
        f"or a (user, password) pair, not {type(auth).__name__}"
    )


def _library(auth: Any) -> Any:
    """The httpx-like package whose ``Auth`` class ``auth`` derives from (with its
    ``Request`` and ``Response``), or None."""
    for base in type(auth).__mro__:
        if base.__name__ == "Auth" and base is not httpx.Auth:
            package = base.__module__.split(".")[0]
            try:
                module = importlib.import_module(package)
            except ImportError:  # pragma: no cover - the class came from it
                return None
            if all(hasattr(module, name) for name in ("Request", "Response", "Auth")):
                return module
    return None


class ForeignAuth(httpx.Auth):
    """An ``httpx.Auth`` that drives the auth flow of another httpx-like library (httpx2).

    The request being authenticated goes out as httpx built it (its headers updated with
    what the flow set, e.g. Authorization), so its answer still streams; the flow's own
    requests (metadata, registration, token) are translated to httpx, and their answers read
    whole, up to `MAX_AUTH_BODY`. The answer to the request itself is handed to the flow with
    its body only when it is an error (401, 403...), so an SSE stream is never read here."""

    def __init__(self, flow: Any) -> None:
        self.flow = flow
        self.library = _library(flow)

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        lib = self.library
        theirs = lib.Request(
            request.method, str(request.url), headers=list(request.headers.raw), content=request.content
        )
        steps = self.flow.async_auth_flow(theirs)
        try:
            outgoing = await steps.__anext__()
            for _ in range(MAX_FLOW_STEPS):
                if outgoing is theirs:
                    mine = request
                    for name in list(request.headers):
                        if name.lower() not in theirs.headers:
                            del request.headers[name]
                    for name, value in theirs.headers.multi_items():
                        request.headers[name] = value
                else:
                    await outgoing.aread()
                    mine = httpx.Request(
                        outgoing.method,
                        str(outgoing.url),
                        headers=list(outgoing.headers.raw),
                        content=outgoing.content,
                    )
                response = yield mine
                body = b""
                if mine is not request or response.status_code >= 400:
                    body = await _bounded(response)
                answer = lib.Response(
                    response.status_code,
                    headers=list(response.headers.raw),
                    content=body,
                    request=outgoing,
                )
                try:
                    outgoing = await steps.asend(answer)
                except StopAsyncIteration:
                    return
            raise httpx.RequestError(
                f"the authentication made over {MAX_FLOW_STEPS} requests", request=request
            )
        finally:
            await steps.aclose()


async def _bounded(response: httpx.Response) -> bytes:
    """The body of an answer the flow reads, up to `MAX_AUTH_BODY` bytes; kept on the
    response too, so httpx (or the transport) can read it again."""
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_AUTH_BODY:
            await response.aclose()
            raise httpx.DecodingError(
                f"an answer to the authentication went over {MAX_AUTH_BODY} bytes", request=response.request
            )
        chunks.append(chunk)
    body = b"".join(chunks)
    response._content = body  # read once: httpx reads .content, not the consumed stream, from now on
    return body
