"""The inbound validation ladder of an MCP server, sans-IO: what a request must be before
any method sees it, each rule a pure function that returns a `Refusal` (or None).

Every server of the package climbs these ladders, in this order, through the server core's
one front (``ssewire.mcp.server.front``: the reference server, the gateway's sessions and
its 2026-07-28 passthrough, the revision bridge), so a rule added here is one that every
one of them follows (the headers, then the session, before a byte of the body is read):

- `POST_HEADERS`: Accept lists JSON and SSE (406), Content-Type is JSON (415);
- `GET_HEADERS`: Accept lists SSE (406);
- `SESSION_HEADERS`: an Mcp-Session-Id is sent (400), MCP-Protocol-Version, when sent,
  is a known revision (400); whether the session exists is the server's to say (404);
- `read_message`: the body is one JSON document (400, -32700), then `MESSAGE_RULES`: one
  JSON-RPC 2.0 object, a string method, a request id by `valid_request_id`, initialize as a
  request, a response with an id and exactly one of result and error (400, -32600).

The body is parsed by orjson: UTF-8 only (RFC 8259 section 8.1: no BOM, no UTF-16, no lone
surrogate), no NaN or Infinity, and a duplicate key keeps its last value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ..._http import acceptable, media_type
from .codes import INVALID_REQUEST, PARSE_ERROR
from .profiles import KNOWN_VERSIONS
from .wire import JSON, META_CAPABILITIES, META_VERSION, SSE

Headers = Mapping[str, str]  # lower-case names, the last of a repeated field
# the largest integer a float holds exactly: a float id past it is no longer what was written
EXACT_FLOAT = 2**53


@dataclass(frozen=True)
class Refusal:
    """A request refused before dispatch: the HTTP status, the JSON-RPC error (``ident`` is
    the request's id when it could be read, else None; ``data`` its error's data, if any) and
    headers of the answer's own."""

    status: int
    code: int
    text: str
    ident: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    data: Any = None


HeaderRule = Callable[[Headers], "Refusal | None"]
MessageRule = Callable[[dict[str, Any]], "Refusal | None"]


# -- headers -----------------------------------------------------------------------------


def post_accept(headers: Headers) -> Refusal | None:
    accept = headers.get("accept")
    if accept is not None and acceptable(accept, JSON) and acceptable(accept, SSE):
        return None
    return Refusal(
        406, INVALID_REQUEST, "Not Acceptable: Accept must list application/json and text/event-stream"
    )


def json_content_type(headers: Headers) -> Refusal | None:
    if media_type(headers.get("content-type")) == JSON:
        return None
    return Refusal(415, INVALID_REQUEST, "Unsupported Media Type: send application/json")


def stream_accept(headers: Headers) -> Refusal | None:
    accept = headers.get("accept")
    if accept is not None and acceptable(accept, SSE):
        return None
    return Refusal(406, INVALID_REQUEST, "Not Acceptable: Accept must list text/event-stream")


def session_id_sent(headers: Headers) -> Refusal | None:
    if headers.get("mcp-session-id") is not None:
        return None
    return Refusal(400, INVALID_REQUEST, "Bad Request: Mcp-Session-Id required")


def known_version(headers: Headers) -> Refusal | None:
    """MCP-Protocol-Version, when sent, names a revision (2025-06-18 on: a server MUST answer
    400 to an invalid or unsupported one). Checked before the session is looked up: it is a
    fact of the request alone, and a 404 would only send the client to initialize again."""
    version = headers.get("mcp-protocol-version")
    if version is None or version.strip() in KNOWN_VERSIONS:
        return None
    return Refusal(400, INVALID_REQUEST, f"Unsupported protocol version: {version[:64]}")


POST_HEADERS: tuple[HeaderRule, ...] = (post_accept, json_content_type)
GET_HEADERS: tuple[HeaderRule, ...] = (stream_accept,)
SESSION_HEADERS: tuple[HeaderRule, ...] = (session_id_sent, known_version)


def first_refusal(rules: Iterable[HeaderRule], headers: Headers) -> Refusal | None:
    """The first rule of a ladder that refuses, or None."""
    for rule in rules:
        refusal = rule(headers)
        if refusal is not None:
            return refusal
    return None


# -- the message -------------------------------------------------------------------------


def valid_request_id(ident: Any) -> bool:
    """MCP: a request id is a string or an integer, never null (basic protocol,
    "Requests"; JSON-RPC also allows null and fractions, which MCP does not). A number
    with no fractional part counts (JSON Schema's ``integer``, as the official SDKs read
    ``1.0``), up to 2**53 when written as a float: past that it is no longer the integer
    the client wrote, and the answer's id could not name its request."""
    if isinstance(ident, bool):
        return False
    if isinstance(ident, (str, int)):
        return True
    return isinstance(ident, float) and ident.is_integer() and abs(ident) <= EXACT_FLOAT


def one_message(message: dict[str, Any]) -> Refusal | None:
    if message.get("jsonrpc") == "2.0":
        return None
    return Refusal(400, INVALID_REQUEST, "Invalid Request: one JSON-RPC message per POST")


def string_method(message: dict[str, Any]) -> Refusal | None:
    if "method" not in message or isinstance(message["method"], str):
        return None
    return Refusal(400, INVALID_REQUEST, "Invalid Request: method must be a string", _echo(message))


def request_id(message: dict[str, Any]) -> Refusal | None:
    if "method" not in message or "id" not in message or valid_request_id(message["id"]):
        return None
    # the id cannot be echoed as one, so the error's id is null (JSON-RPC section 5)
    return Refusal(400, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")


def initialize_is_a_request(message: dict[str, Any]) -> Refusal | None:
    if message.get("method") != "initialize" or "id" in message:
        return None
    return Refusal(400, INVALID_REQUEST, "Invalid Request: initialize must be a request, with an id")


def response_shape(message: dict[str, Any]) -> Refusal | None:
    """Not a request or a notification, so a response: an id, and exactly one of result and
    error. Its id names one of the server's requests (a string or an integer); null only in
    an error, as JSON-RPC answers a request whose id could not be read."""
    if "method" in message:
        return None
    answered = ("result" in message) != ("error" in message)
    ident = message.get("id")
    named = valid_request_id(ident) or (ident is None and "id" in message and "error" in message)
    if answered and named:
        return None
    return Refusal(400, INVALID_REQUEST, "Invalid Request: neither a request, a notification nor a response")


def unasked_answer(ident: Any) -> Refusal:
    """A response naming no request the server sent (or one answered already): refused, as
    the transport allows for input the server cannot accept, so a client cannot make the
    server hold answers nobody awaits."""
    return Refusal(
        400, INVALID_REQUEST, "Invalid Request: no request of the server awaits this answer", ident
    )


MESSAGE_RULES: tuple[MessageRule, ...] = (
    one_message,
    string_method,
    request_id,
    initialize_is_a_request,
    response_shape,
)


def read_message(
    body: bytes | bytearray, rules: Iterable[MessageRule] | None = None
) -> dict[str, Any] | Refusal:
    """One POSTed JSON-RPC message, or the refusal of the first rule it breaks (of
    `MESSAGE_RULES` as they are when it is called, unless ``rules`` are given)."""
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return Refusal(400, PARSE_ERROR, "Parse error")
    if not isinstance(message, dict):
        return Refusal(400, INVALID_REQUEST, "Invalid Request: one JSON-RPC message per POST")
    for rule in MESSAGE_RULES if rules is None else rules:
        refusal = rule(message)
        if refusal is not None:
            return refusal
    return message


def _echo(message: dict[str, Any]) -> Any:
    """The message's id when it can stand as the error's id, else None."""
    ident = message.get("id")
    return ident if valid_request_id(ident) else None


def missing_meta(params: Any) -> str | None:
    """What a 2026-07-28 request's ``_meta`` lacks of what every request carries (its revision
    and the client's capabilities), as the -32602 text; None when it has both."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return "Invalid params: _meta is required"
    if not isinstance(meta.get(META_VERSION), str):
        return f"Invalid params: _meta {META_VERSION} is required"
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        return f"Invalid params: _meta {META_CAPABILITIES} is required"
    return None
