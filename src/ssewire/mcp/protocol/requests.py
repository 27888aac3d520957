"""Building requests, sans-IO: the headers of each HTTP method and the JSON-RPC bodies with
the ``_meta`` each revision asks for. The client, the probe and the gateway send what this
builds; the validator's model and the reference server judge requests by the same facts.

``profile`` is the revision the conversation speaks, None before one is agreed (then only
the media-type headers are sent)."""

from __future__ import annotations

from typing import Any

from .bridging import META_CLIENT_INFO
from .profiles import Profile
from .wire import (
    BOTH,
    JSON,
    LAST_EVENT_ID,
    META_CAPABILITIES,
    META_VERSION,
    METHOD,
    NAME,
    NAME_FIELDS,
    PROTOCOL_VERSION,
    SESSION_ID,
    SSE,
)


def post_headers(
    profile: Profile | None, session: str | None, method: str | None = None, name: object = None
) -> dict[str, str]:
    """The headers of a POST: Accept and Content-Type always; under 2026-07-28 the version,
    and for a request Mcp-Method and Mcp-Name; earlier, the session id and (from 2025-06-18)
    the version."""
    headers = {"Accept": BOTH, "Content-Type": JSON}
    return {**headers, **_conversation(profile, session, method, name)}


def get_headers(
    profile: Profile | None, session: str | None, last_event_id: str | None = None
) -> dict[str, str]:
    """A GET: the standalone stream, or with ``last_event_id`` the resumption of a stream."""
    headers = {"Accept": SSE, **_conversation(profile, session)}
    if last_event_id is not None:
        headers[LAST_EVENT_ID] = last_event_id
    return headers


def delete_headers(profile: Profile | None, session: str | None) -> dict[str, str]:
    """A DELETE ending the session."""
    return _conversation(profile, session)


def _conversation(
    profile: Profile | None, session: str | None, method: str | None = None, name: object = None
) -> dict[str, str]:
    headers: dict[str, str] = {}
    if profile is None:
        return headers
    if profile.request_headers:
        headers[PROTOCOL_VERSION] = profile.name
        if method is not None and not method.startswith("notifications/"):
            headers[METHOD] = method
            if isinstance(name, str):
                headers[NAME] = name
        return headers
    if session is not None:
        headers[SESSION_ID] = session
    if profile.version_header:
        headers[PROTOCOL_VERSION] = profile.name
    return headers


def name_of(method: str, params: Any) -> object:
    """What Mcp-Name carries for ``method`` (the tool or prompt name, the resource URI), or None."""
    field = NAME_FIELDS.get(method)
    return params.get(field) if field is not None and isinstance(params, dict) else None


def request(
    ident: Any,
    method: str,
    params: dict[str, Any] | None,
    profile: Profile | None,
    *,
    capabilities: dict[str, Any] | None = None,
    client_info: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A JSON-RPC request; under 2026-07-28 its ``_meta`` carries the version, the client's
    capabilities and, given ``client_info``, its identity (what the caller put in ``_meta``
    is kept)."""
    params = dict(params or {})
    if profile is not None and profile.request_headers:
        meta = dict(params.get("_meta") or {})
        meta.setdefault(META_VERSION, profile.name)
        meta.setdefault(META_CAPABILITIES, capabilities or {})
        if client_info is not None:
            meta.setdefault(META_CLIENT_INFO, client_info)
        params["_meta"] = meta
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
    if params:
        body["params"] = params
    return body


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params:
        body["params"] = params
    return body


def result(ident: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "result": value}


def error(ident: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
