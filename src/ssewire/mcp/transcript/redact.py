"""``ssewire redact``: mask the secrets of a transcript, keeping everything that is checked.

Credentials (Authorization, Proxy-Authorization, Cookie, Set-Cookie, X-Api-Key, tokens in
URLs and OAuth fields) become ``<redacted>``. Session ids become ``session-A``,
``session-B``..., and SSE event ids, in ``id:`` lines and in Last-Event-ID alike, become
``event-1``, ``event-2``..., each consistently across the transcript, so the session and
resumption rules read the same afterwards. Tool arguments keep their shape with their
values masked. Statuses, JSON-RPC ids, methods and chunk boundaries are kept: an ``id:``
line that was split across two chunks is still split after redaction.
"""

from __future__ import annotations

import base64
import copy
import itertools
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..._secrets import CREDENTIAL_HEADERS, JSON_FIELD, JSON_KEYS, MASK, URL_PARAMS, mask_text
from .format import from_document


class _Names:
    """Consistent stand-ins: the same value always gets the same name."""

    def __init__(self, make: Callable[[int], str]) -> None:
        self._make = make
        self._names: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        if value not in self._names:
            self._names[value] = self._make(len(self._names))
        return self._names[value]

    def session(self, value: str) -> str:
        """A session id's stand-in; one that broke the visible-ASCII rule still breaks it."""
        name = self(value)
        if value and all(0x21 <= ord(c) <= 0x7E for c in value):
            return name
        return f"{name} (not visible ASCII)"


def _session_name(n: int) -> str:
    letters = ""
    n += 1
    while n:
        n, rest = divmod(n - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return f"session-{letters}"


def redact(document: dict[str, Any]) -> dict[str, Any]:
    """A redacted copy of a transcript document (checked first: bad input raises)."""
    from_document(document)  # raises TranscriptError on a malformed transcript
    out = copy.deepcopy(document)
    sessions = _Names(_session_name)
    event_ids = _Names(lambda n: f"event-{n + 1}")
    for exchange in out["exchanges"]:
        request = exchange["request"]
        request["headers"] = _headers(request.get("headers", {}), sessions, event_ids)
        if "url" in request and isinstance(request["url"], str):
            request["url"] = _url(request["url"])
        if "body" in request:
            request["body"] = _json(_tool_arguments(request["body"]))
        if "body_text" in request:
            request["body_text"] = mask_text(request["body_text"])
        response = exchange.get("response")
        if not response:
            continue
        if "headers" in response:
            response["headers"] = _headers(response["headers"], sessions, event_ids)
        if "body" in response:
            response["body"] = _json(response["body"])
        if "body_text" in response:
            response["body_text"] = mask_text(response["body_text"])
        if "chunks" in response:
            pieces = [c.encode("utf-8") for c in response["chunks"]]
            response["chunks"] = [p.decode("utf-8") for p in _sse(pieces, event_ids)]
        elif "chunks_b64" in response:
            pieces = [base64.b64decode(c) for c in response["chunks_b64"]]
            response["chunks_b64"] = [base64.b64encode(p).decode("ascii") for p in _sse(pieces, event_ids)]
    if isinstance(out.get("tuple"), dict):
        out["tuple"] = _free_text(out["tuple"])
    out["redacted"] = True
    return out


def _headers(headers: dict[str, Any], sessions: _Names, event_ids: _Names) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in headers.items():
        lower = name.lower()
        if lower in CREDENTIAL_HEADERS:
            mask = _mask_credential
        elif lower == "mcp-session-id":
            mask = sessions.session
        elif lower == "last-event-id":
            mask = event_ids
        else:
            result[name] = value
            continue
        result[name] = [mask(v) for v in value] if isinstance(value, list) else mask(value)
    return result


def _free_text(value: Any) -> Any:
    """Strings in free-form places (``tuple``): URLs and ``key=value`` secrets masked."""
    if isinstance(value, dict):
        return {k: _free_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_free_text(v) for v in value]
    if isinstance(value, str):
        return mask_text(_url(value) if "://" in value else value)
    return value


def _mask_credential(value: str) -> str:
    scheme = value.split(" ", 1)[0] if " " in value.strip() else ""
    return f"{scheme} {MASK}" if scheme.isalpha() else MASK


def _url(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{MASK}@" + netloc.rsplit("@", 1)[1]
    query = urlencode(
        [
            (k, MASK if k.lower() in URL_PARAMS else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ],
        safe="<>",
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _json(value: Any) -> Any:
    """Mask OAuth-like fields at any depth."""
    if isinstance(value, dict):
        return {
            k: MASK if k.lower() in JSON_KEYS and isinstance(v, str) else _json(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_json(v) for v in value]
    return value


def _tool_arguments(body: Any) -> Any:
    """Mask the argument values of every tools/call in a POST body, keeping their shape."""
    for message in body if isinstance(body, list) else [body]:
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message.get("params")
            if isinstance(params, dict) and "arguments" in params:
                params["arguments"] = _shape(params["arguments"])
    return body


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, str):
        return MASK
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return 0
    return value


_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n|$)")


def _sse(pieces: list[bytes], event_ids: _Names) -> list[bytes]:
    """Replace ``id:`` values and secret JSON fields in an SSE body, keeping the splits."""
    whole = b"".join(pieces)
    spans: list[tuple[int, int, bytes]] = []
    start = 3 if whole.startswith(b"\xef\xbb\xbf") else 0
    for line in _LINE.finditer(whole, start):
        text = line.group().rstrip(b"\r\n")
        if not text and line.end() == line.start():
            break
        if text == b"id" or text.startswith(b"id:"):
            value_start = line.start() + 3 + (text[3:4] == b" ")
            value = whole[value_start : line.start() + len(text)]
            if value_start <= line.start() + len(text) and value:
                spans.append(
                    (
                        value_start,
                        value_start + len(value),
                        event_ids(value.decode("utf-8", "replace")).encode(),
                    )
                )
    for match in JSON_FIELD.finditer(whole):
        value_start = match.start() + len(match.group(1))
        if not any(s < match.end() and value_start < e for s, e, _ in spans):
            spans.append((value_start, match.end(), b'"' + MASK.encode() + b'"'))
    spans.sort()
    return _rebuild(whole, pieces, spans)


def _rebuild(whole: bytes, pieces: list[bytes], spans: list[tuple[int, int, bytes]]) -> list[bytes]:
    """Apply the replacements and cut the result where the original was cut.

    A cut inside a replaced value stays inside its replacement (at the same offset, or
    its last byte), so a split ``id:`` line remains split.
    """
    if not pieces:
        return []
    out = bytearray()
    moved: list[tuple[int, int, int]] = []  # (old start, old end, new start)
    position = 0
    for old_start, old_end, new in spans:
        out += whole[position:old_start]
        moved.append((old_start, old_end, len(out)))
        out += new
        moved[-1] = (old_start, old_end, len(out) - len(new))
        position = old_end
    out += whole[position:]

    def new_offset(old: int) -> int:
        delta = 0
        for (old_start, old_end, new_start), (_, _, new) in zip(moved, spans, strict=True):
            if old <= old_start:
                break
            if old < old_end:  # inside a replaced value
                return new_start + max(1, min(old - old_start, len(new) - 1)) if len(new) > 1 else new_start
            delta = new_start + len(new) - old_end
        return old + delta

    cuts, total = [], 0
    for piece in pieces[:-1]:
        total += len(piece)
        cuts.append(new_offset(total))
    bounds = [0, *cuts, len(out)]
    return [bytes(out[a:b]) for a, b in itertools.pairwise(bounds)]
