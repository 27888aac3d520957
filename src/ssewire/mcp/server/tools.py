"""Which of its upstream's tools a route offers: an allow-list or a deny-list, applied to
``tools/list`` (the answer filtered) and ``tools/call`` (a refused tool never goes up), by
each relay of the route alike (the gateway's sessions, its passthrough, the bridge)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from ..protocol.codes import INVALID_PARAMS
from .asgi import error_message

LIST, CALL = "tools/list", "tools/call"


class ToolPolicy:
    """Tools by name: only ``allow``'s, or all but ``deny``'s (one of the two)."""

    def __init__(self, *, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None) -> None:
        if (allow is None) == (deny is None):
            raise ValueError("a tool policy is an allow-list or a deny-list")
        self.allow = frozenset(allow) if allow is not None else None
        self.deny = frozenset(deny) if deny is not None else frozenset()

    def permits(self, name: Any) -> bool:
        if not isinstance(name, str):
            return False
        return name in self.allow if self.allow is not None else name not in self.deny

    def refused(self, message: dict[str, Any]) -> str | None:
        """The tool a ``tools/call`` names when this route does not offer it, else None; a
        call naming no tool by a string (params missing, a list, a null name) is refused
        too, since an upstream might still find a tool in it."""
        if message.get("method") != CALL:
            return None
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        return None if isinstance(name, str) and self.permits(name) else str(name)[:128]

    def filtered(self, result: Any) -> Any:
        """A ``tools/list`` result with only the tools offered (its cursor kept)."""
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return result
        tools = [
            tool for tool in result["tools"] if isinstance(tool, dict) and self.permits(tool.get("name"))
        ]
        return {**result, "tools": tools}

    def filtered_message(self, data: bytes, ident: Any) -> bytes:
        """The bytes of an answer to ``tools/list`` request ``ident``, filtered; other
        messages (and what is not JSON) unchanged."""
        message = listing_answer(data, ident)
        return data if message is None else self.filtered_answer(message)

    def filtered_answer(self, message: dict[str, Any]) -> bytes:
        """A `listing_answer`, filtered, as bytes."""
        return orjson.dumps({**message, "result": self.filtered(message["result"])})


def listing_answer(data: bytes, ident: Any) -> dict[str, Any] | None:
    """The answer to request ``ident`` with a result (a ``tools/list`` relayed), parsed once
    for all who read it; None for other messages and for what is not JSON."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or message.get("id") != ident or "result" not in message:
        return None
    return message


def tool_refused(ident: Any, name: str) -> dict[str, Any]:
    """The answer to a call of a tool this route does not offer (never sent upstream)."""
    text = f"gateway: tool {name!r} is not available on this route"
    return error_message(ident, INVALID_PARAMS, text, {"gateway": "tool-refused", "tool": name})
