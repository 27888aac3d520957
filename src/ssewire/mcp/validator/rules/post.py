"""POST: the request body and Accept header, and the answer a POST must get."""

from __future__ import annotations

from collections.abc import Iterator

from ...._http import JSON, accept_value, accepts, is_success, media_type
from ....jsonrpc import Kind
from ...checks.findings import Level
from ..model import SSE, ExchangeView, Model
from ._registry import POST, Hit, rule

SENDING = "Sending Messages to the Server"


@rule(
    "invalid_post_accept",
    Level.ERROR,
    "MUST",
    SENDING,
    "send 'Accept: application/json, text/event-stream' on every POST",
    on=POST,
)
def post_accept(x: ExchangeView, m: Model) -> Iterator[Hit]:
    accept = accept_value(x.ex.request.headers.all("accept"))
    if accept is None or not (accepts(accept, JSON) and accepts(accept, SSE)):
        shown = "missing" if accept is None else repr(accept)
        yield Hit("/request/headers/accept", f"POST Accept is {shown}: it must list both {JSON} and {SSE}")


@rule(
    "invalid_request_body",
    Level.ERROR,
    "MUST",
    SENDING,
    "POST a single valid JSON-RPC request, notification or response",
    on=POST,
)
def request_body(x: ExchangeView, m: Model) -> Iterator[Hit]:
    body = x.request
    assert body is not None
    if body.missing:
        yield Hit("/request", "the POST has no body")
    elif body.unparsable is not None:
        yield Hit("/request/body_text", f"the POST body is not JSON ({body.unparsable} bytes)")
    elif body.batch and not body.size:
        yield Hit("/request/body", "an empty JSON-RPC batch")
    for where, reason in body.invalid:
        yield Hit(where, f"not a JSON-RPC message: {reason}")


@rule("invalid_request_body", on=POST)
def client_sent_a_response(x: ExchangeView, m: Model) -> Iterator[Hit]:
    assert x.request is not None
    if m.profile.request_headers and any(msg.kind.answers for msg in x.request.messages):
        yield Hit(
            "/request/body",
            f"the client POSTed a JSON-RPC response; in {m.profile.name} clients never send responses",
        )


@rule(
    "batch_not_allowed",
    Level.ERROR,
    "MUST",
    SENDING,
    "send one JSON-RPC message per POST: this revision has no batches",
    on=POST,
)
def batch_not_allowed(x: ExchangeView, m: Model) -> Iterator[Hit]:
    assert x.request is not None
    if x.request.batch and not m.profile.batches:
        yield Hit(
            "/request/body",
            f"a JSON-RPC batch of {x.request.size} was POSTed; {m.profile.name} has no batches",
        )


@rule(
    "post_not_answered_202",
    Level.ERROR,
    "MUST",
    SENDING,
    "answer an accepted notification or response with 202 and no body (or reject it with 4xx)",
    on=POST,
)
def post_not_answered_202(x: ExchangeView, m: Model) -> Iterator[Hit]:
    resp, body = x.ex.response, x.request
    assert body is not None
    if resp is None or body.requests or x.must_reject or not body.messages or not is_success(resp.status):
        return
    if resp.status != 202 or resp.has_body:
        what = "202 with a body" if resp.status == 202 else str(resp.status)
        yield Hit(
            "/response/status",
            f"a POST of only notifications/responses was answered {what}, not 202 with no body",
        )


@rule(
    "invalid_response_content_type",
    Level.ERROR,
    "MUST",
    SENDING,
    "answer a request with Content-Type application/json or text/event-stream",
    on=POST,
)
def post_response_content_type(x: ExchangeView, m: Model) -> Iterator[Hit]:
    resp = x.ex.response
    assert x.request is not None
    if resp is None or not x.request.requests or not is_success(resp.status):
        return
    ctype = media_type(resp.headers.get("content-type"))
    if ctype not in (JSON, SSE):
        shown = "missing" if ctype is None else repr(ctype)
        yield Hit(
            "/response/headers/content-type",
            f"a request was answered {resp.status} with Content-Type {shown}, not {JSON} or {SSE}",
        )


@rule(
    "invalid_json_response",
    Level.ERROR,
    "MUST",
    SENDING,
    "answer with one JSON-RPC response whose id is the request's id",
    on=POST,
)
def json_response_answers_the_request(x: ExchangeView, m: Model) -> Iterator[Hit]:
    body = x.body
    if x.stream is None or body is None or body.kind != "json" or not body.messages:
        return  # (x.stream: a successful answer to requests, with a valid content type)
    assert x.request is not None
    wanted = {msg.id for msg in x.request.requests}
    got = {msg.id for msg in body.messages if msg.kind.answers}
    if not (wanted & got) and not any(msg.kind == Kind.ERROR and msg.id is None for msg in body.messages):
        yield Hit("/response/body", "the JSON response does not answer the request's id")
