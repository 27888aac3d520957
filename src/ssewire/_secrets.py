"""What looks like a secret: the one definition behind every mask and every finding.

Used by ``jsonrpc`` (the excerpt of an invalid message), ``mcp.redact`` and the
validator's ``unredacted_credential`` rules. No I/O, no imports beyond the stdlib.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

MASK = "<redacted>"

CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"})
URL_PARAMS = frozenset(
    {
        "access_token",
        "token",
        "api_key",
        "apikey",
        "key",
        "code",
        "client_secret",
        "password",
        "sig",
        "signature",
        "auth",
    }
)
# OAuth and similar fields inside JSON bodies.
JSON_KEYS = frozenset(
    {
        "access_token",
        "refresh_token",
        "id_token",
        "client_secret",
        "code_verifier",
        "password",
        "api_key",
        "apikey",
        "authorization",
    }
)


def is_masked(value: str) -> bool:
    """A value already masked, by ``ssewire redact`` or by hand (``<...>``, ``***``, empty)."""
    lowered = value.strip().lower()
    return not lowered or "redacted" in lowered or lowered.startswith("<") or "***" in lowered


def url_credentials(url: str) -> list[str]:
    """Names of the URL parts that carry an unmasked credential (never their values)."""
    parts = urlsplit(url)
    names = sorted(
        {
            k
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k.lower() in URL_PARAMS and not is_masked(v)
        }
    )
    if parts.password and not is_masked(parts.password):
        names.append("userinfo")
    return names


def json_credentials(value: Any, path: str = "") -> Iterator[str]:
    """JSON-pointer paths of unmasked credential fields inside a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}/{key}"
            if (
                isinstance(key, str)
                and key.lower() in JSON_KEYS
                and isinstance(item, str)
                and not is_masked(item)
            ):
                yield here
            else:
                yield from json_credentials(item, here)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from json_credentials(item, f"{path}/{index}")


# ``key=value`` (forms, query strings) or ``"key": "value"`` (JSON) in free text.
_IN_TEXT = re.compile(
    r'(?i)(?<![\w-])("?)('
    + "|".join(sorted(JSON_KEYS | {"code", "token"}))
    + r')\1(\s*[=:]\s*)("?)([^&"\s,;}]+)'
)


def text_credentials(text: str) -> list[str]:
    """Names of credential fields with an unmasked value in free text (never the values)."""
    return sorted({m.group(2).lower() for m in _IN_TEXT.finditer(text) if not is_masked(m.group(5))})


def mask_text(text: str) -> str:
    """Free text with every credential field's value masked."""
    return _IN_TEXT.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}{m.group(4)}{MASK}", text)


# ``"key": "value"`` for a credential key in raw JSON bytes (SSE data); a value cut short
# (a torn event, an excerpt's end) is masked to where it stops.
JSON_FIELD = re.compile(
    rb'("(?:'
    + b"|".join(re.escape(k.encode()) for k in sorted(JSON_KEYS))
    + rb')"\s*:\s*)"(?:[^"\\\r\n]|\\.)*"?',
    re.IGNORECASE,
)
# A run long enough to be a token or key whatever its field name.
LONG_TOKEN = re.compile(rb"[A-Za-z0-9+/=_\-.]{32,}")


def mask_json_bytes(data: bytes) -> bytes:
    """``data`` with credential fields' values and token-like runs masked."""
    data = JSON_FIELD.sub(rb'\1"' + MASK.encode() + b'"', data)
    return LONG_TOKEN.sub(MASK.encode(), data)


def public_url(url: str) -> str:
    """``url`` as a text may name it: scheme, host, port and path; never its userinfo, query
    or fragment, which is where credentials ride (``?api_key=...``)."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:  # not a URL we can take apart: say nothing of it
        return MASK
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    query = f"?{MASK}" if parts.query else ""
    path = "/".join(MASK if _secret_segment(part) else part for part in parts.path.split("/"))
    return f"{parts.scheme}://{host}{port}{path}{query}" if parts.scheme else MASK


_TOKEN_SEGMENT = re.compile(r"[A-Za-z0-9_\-.~+=%]{20,}")


def _secret_segment(part: str) -> bool:
    """A path segment that may be a key (hosted MCP servers put one there: ``/s/<key>/mcp``):
    20 or more token characters with letters and digits both."""
    return (
        bool(_TOKEN_SEGMENT.fullmatch(part))
        and any(c.isdigit() for c in part)
        and any(c.isalpha() for c in part)
    )


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")


def scrub_urls(text: str) -> str:
    """Free text (an exception's message, an error sent to a client) with every URL in it
    reduced to `public_url` and credential fields masked."""
    return mask_text(_URL_IN_TEXT.sub(lambda m: public_url(m.group(0)), text))
