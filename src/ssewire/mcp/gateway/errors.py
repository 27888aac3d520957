"""The gateway's own errors, as JSON-RPC messages with ``data.gateway`` naming which
(every text with its URLs reduced): what each relay path answers when the upstream could
not."""

from __future__ import annotations

from typing import Any

from ..._secrets import scrub_urls
from ..client import Unauthorized
from ..protocol.codes import GATEWAY_ERROR as GATEWAY_ERROR
from ..protocol.codes import gateway_failure


def unauthorized_error(ident: Any, text: str, refused: Unauthorized) -> dict[str, Any]:
    """The gateway's error for an upstream that refused the operator's credentials (401 or
    403): its status, and its challenge when it gave one, URLs reduced as in every text."""
    error = gateway_error(ident, "upstream-unauthorized", scrub_urls(text))
    error["error"]["data"]["status"] = refused.status
    if refused.challenge:
        error["error"]["data"]["challenge"] = scrub_urls(refused.challenge)
    return error


def gateway_error(ident: Any, kind: str, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": gateway_failure(kind, text)}
