"""The one rule for a session the upstream did not open, as both fronts (the gateway, the
bridge) answer it: the upstream's own refusal passed on, a 503 with when to come back, or a
502."""

from __future__ import annotations

import httpx
import pytest

from ssewire.mcp.client import OpenRefused, RPCError, open_refused
from ssewire.mcp.client.errors import MAX_RETRY_AFTER

REFUSAL = {"code": -32600, "message": "no"}


def _http_error(status: int, retry_after: str | None = None) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "http://127.0.0.1/mcp")
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    response = httpx.Response(status, headers=headers, request=request)
    return httpx.HTTPStatusError(f"{status}", request=request, response=response)


@pytest.mark.parametrize(
    "failed, expected",
    [
        # its own JSON-RPC refusal passes on as it came: 200, or 503 when it asked to be tried again
        (RPCError(REFUSAL), OpenRefused(200, None, REFUSAL)),
        (RPCError(REFUSAL, status=400), OpenRefused(200, None, REFUSAL)),
        (RPCError(REFUSAL, status=503, retry_after="7"), OpenRefused(503, "7", REFUSAL)),
        (RPCError(REFUSAL, status=503), OpenRefused(503, "1", REFUSAL)),  # (said nothing: 1 s)
        # any other failure: 503 when it cannot serve now, with when to come back, else 502
        (_http_error(503, "2"), OpenRefused(503, "2", None)),
        (_http_error(503, "2.5"), OpenRefused(503, "1", None)),  # (not RFC 9110 delay-seconds: 1 s)
        (_http_error(503, "3600"), OpenRefused(503, str(MAX_RETRY_AFTER), None)),  # (a hostile wait cut)
        (_http_error(500, "7"), OpenRefused(502, None, None)),
        (httpx.ConnectError("refused"), OpenRefused(502, None, None)),
    ],
)
def test_a_session_the_upstream_did_not_open_is_answered_by_one_rule(failed, expected):
    refused = open_refused(failed)
    assert refused == expected
    assert refused.headers == ((("retry-after", expected.retry_after),) if expected.retry_after else ())
