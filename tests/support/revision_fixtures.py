"""The SDK fixture server (`tests.support.sdk_fixture_server`) speaking one revision only:
an upstream as a server of one revision would be, for the revision bridge's tests.

``only_sessions(app)`` serves 2025-11-25 (sessions) and refuses every 2026-07-28 request;
``only_stateless(app)`` serves 2026-07-28 and refuses every request of a session revision
(an ``initialize`` included). A refusal is what a server refuses an unsupported revision with
under 2026-07-28: 400 and -32022, its ``data.supported`` the one revision served and
``data.requested`` the one asked (its first 64 characters). Preflights (OPTIONS) and paths
other than the fixture's pass.
"""

from __future__ import annotations

from typing import Any

import orjson

from ssewire.mcp.protocol.codes import UNSUPPORTED_VERSION
from ssewire.mcp.protocol.profiles import NEWEST, NEWEST_WITH_SESSIONS, PROFILES
from tests.support.sdk_fixture_server import PATH

MAX_REQUESTED = 64  # characters of the asked version echoed back


def _stateless(version: str) -> bool:
    profile = PROFILES.get(version.strip(" \t"))
    return profile is not None and not profile.sessions


def _one_revision(app: Any, *, stateless: bool) -> Any:
    served = NEWEST.name if stateless else NEWEST_WITH_SESSIONS.name

    async def filtered(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == PATH and scope["method"] != "OPTIONS":
            names = [v for k, v in scope["headers"] if k.lower() == b"mcp-protocol-version"]
            asked = names[0].decode("latin-1") if names else ""
            if _stateless(asked) != stateless:
                error = {
                    "code": UNSUPPORTED_VERSION,
                    "message": f"Unsupported protocol version: this server speaks {served} only",
                    "data": {"supported": [served], "requested": asked[:MAX_REQUESTED]},
                }
                body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": error})
                head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
                await send({"type": "http.response.start", "status": 400, "headers": head})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return filtered


def only_sessions(app: Any) -> Any:
    """``app`` serving 2025-11-25 clients only (a request naming 2026-07-28: 400, -32022)."""
    return _one_revision(app, stateless=False)


def only_stateless(app: Any) -> Any:
    """``app`` serving 2026-07-28 requests only (any other: 400, -32022)."""
    return _one_revision(app, stateless=True)
