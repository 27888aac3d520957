"""GET (the standalone stream) and DELETE (ending a session), and 2026-07-28, which
removed both."""

from __future__ import annotations

from collections.abc import Iterator

from ...._http import accept_value, accepts, is_success, media_type
from ...checks.findings import Level
from ..model import SSE, ExchangeView, Model
from ._registry import DELETE, GET, Hit, rule

LISTENING = "Listening for Messages from the Server"


@rule(
    "invalid_get_accept",
    Level.ERROR,
    "MUST",
    LISTENING,
    "send 'Accept: text/event-stream' on the GET",
    on=GET,
)
def get_accept(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if not m.profile.get_stream:
        return
    accept = accept_value(x.ex.request.headers.all("accept"))
    if accept is None or not accepts(accept, SSE):
        shown = "missing" if accept is None else repr(accept)
        yield Hit("/request/headers/accept", f"GET Accept is {shown}: it must list {SSE}")


@rule("invalid_response_content_type", on=GET)
def get_response_content_type(x: ExchangeView, m: Model) -> Iterator[Hit]:
    resp = x.ex.response
    if not m.profile.get_stream or resp is None or not is_success(resp.status):
        return
    ctype = media_type(resp.headers.get("content-type"))
    if ctype != SSE:
        shown = "missing" if ctype is None else repr(ctype)
        yield Hit(
            "/response/headers/content-type",
            f"a GET was answered {resp.status} with Content-Type {shown}, not {SSE}",
        )


@rule(
    "response_on_standalone_get",
    Level.ERROR,
    "MUST NOT",
    LISTENING,
    "send responses on the POST stream of their request; the GET stream carries requests and notifications",
    on=GET,
)
def response_on_standalone_get(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if not m.profile.get_stream or x.body is None or x.ex.request.headers.get("last-event-id") is not None:
        return
    responses = [msg for msg in x.body.messages if msg.kind.answers]
    if responses:
        yield Hit(
            f"/response/events/{responses[0].event}",
            f"{len(responses)} JSON-RPC response(s) on a standalone GET stream that resumes nothing",
        )


def _removed(x: ExchangeView, m: Model, attempt: str, missing: str) -> Iterator[Hit]:
    """The client's attempt is a warning; the server's answer should be 405 (serving the
    removed method with a 2xx is an error)."""
    resp = x.ex.response
    yield Hit("/request/method", f"the client {attempt}; {m.profile.name} has {missing}")
    if resp is not None and resp.status != 405:
        yield Hit(
            "/response/status",
            f"the server answered the {x.method} {resp.status}, not 405",
            level=Level.ERROR if is_success(resp.status) else Level.WARNING,
        )


@rule(
    "get_removed_in_profile",
    Level.WARNING,
    "SHOULD",
    "Backward Compatibility",
    "this revision has no GET stream: use the POST streams; servers answer GET with 405",
    on=GET,
)
def get_removed(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if not m.profile.get_stream:
        yield from _removed(x, m, "opened a GET", "no GET stream")


@rule(
    "delete_removed_in_profile",
    Level.WARNING,
    "SHOULD",
    "Backward Compatibility",
    "this revision has no sessions to end: do not send DELETE; servers answer it with 405",
    on=DELETE,
)
def delete_removed(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if not m.profile.sessions:
        yield from _removed(x, m, "sent DELETE", "no sessions")
