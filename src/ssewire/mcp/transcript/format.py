"""The transcript format ``ssewire-transcript/1``: strict loading into small value types.

A transcript is JSON: the HTTP exchanges of one MCP client/server conversation, with SSE
response bodies kept as the chunks that were observed, in order. Loading is strict, so
that an input problem is never mistaken for a conformance finding: non-standard JSON
(``NaN``, ``Infinity``), a duplicate key, a shape the format does not allow or a
duplicate exchange id raise [`TranscriptError`][ssewire.mcp.transcript.TranscriptError]. Keys starting with ``x-`` are
extension points and are ignored. The schema is ``docs/transcript.schema.json``.
[`TranscriptWriter`][ssewire.mcp.transcript.TranscriptWriter] is the one writer of the format.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..._errors import InputError

FORMAT = "ssewire-transcript/1"


class TranscriptError(InputError):
    """The input is not a readable ``ssewire-transcript/1`` document."""


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()  # a JSON body that was not given (``null`` is a body)


class Headers:
    """Header fields as recorded: names compare case-insensitively, spellings are kept."""

    __slots__ = ("fields",)

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        self.fields = fields  # (name as spelled, value), in document order

    def get(self, name: str) -> str | None:
        """The first value of ``name`` (any spelling), or None."""
        lower = name.lower()
        for key, value in self.fields:
            if key.lower() == lower:
                return value
        return None

    def all(self, name: str) -> list[str]:
        lower = name.lower()
        return [value for key, value in self.fields if key.lower() == lower]

    def spellings(self) -> dict[str, list[str]]:
        """Lower-cased name -> the distinct spellings used for it."""
        found: dict[str, list[str]] = {}
        for key, _ in self.fields:
            spelled = found.setdefault(key.lower(), [])
            if key not in spelled:
                spelled.append(key)
        return found

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None


@dataclass(frozen=True)
class Request:
    method: str
    url: str | None
    headers: Headers
    body: Any  # parsed JSON, or ABSENT
    body_text: str | None  # a body that is not JSON, as text


@dataclass(frozen=True)
class Response:
    status: int
    headers: Headers
    chunks: tuple[bytes, ...] | None  # the body as observed, or None
    body: Any  # parsed JSON (an application/json body), or ABSENT
    body_text: str | None
    disconnected: bool
    truncated: int = 0  # bytes the recorder read after the kept chunks and left out (0: kept whole)

    @property
    def has_body(self) -> bool:
        return bool(self.chunks and any(self.chunks)) or self.body is not ABSENT or bool(self.body_text)


@dataclass(frozen=True)
class Exchange:
    id: str
    index: int  # position in the transcript
    concurrent_group: str | None
    idempotent: bool
    request: Request
    response: Response | None  # None: no response was observed

    @property
    def path(self) -> str:
        return f"/exchanges/{self.index}"


@dataclass(frozen=True)
class Transcript:
    """A transcript as loaded: its exchanges in recorded order, checked for shape."""

    profile: str | None
    tuple: dict[str, Any] | None  # who recorded what (client, server, proxy): free-form
    exchanges: builtins.tuple[Exchange, ...]
    redacted: bool


def loads(text: str | bytes) -> Transcript:
    """Parse and shape-check a transcript; raise [`TranscriptError`][ssewire.mcp.transcript.TranscriptError] on bad input."""
    return from_document(loads_document(text))


def load(path: str) -> Transcript:
    """[`loads`][ssewire.mcp.transcript.loads] of a file (``-`` is standard input)."""
    return from_document(load_document(path))


def loads_document(text: str | bytes) -> Any:
    """Strict JSON: no NaN / Infinity, no duplicate keys, UTF-8 only."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TranscriptError(f"not UTF-8 text: {exc}") from None
    try:
        document = json.loads(
            text, parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
        )
    except TranscriptError:
        raise
    except (ValueError, RecursionError) as exc:
        raise TranscriptError(f"not valid JSON: {exc}") from None
    _check_strings(document, "")
    return document


def load_document(path: str) -> Any:
    """The JSON document at ``path`` (``-``: standard input); ``TranscriptError`` if unreadable."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from None
    return loads_document(data)


def from_document(document: Any) -> Transcript:
    """Shape-check a parsed document; ``TranscriptError`` names the first path that is wrong."""
    top = _object(document, "")
    _keys(top, "", required={"format", "exchanges"}, optional={"profile", "tuple", "redacted"})
    if top["format"] != FORMAT:
        raise TranscriptError(f"/format: expected {FORMAT!r}, got {top['format']!r}")
    profile = _optional(top, "profile", str, "")
    tuple_ = top.get("tuple")
    if tuple_ is not None:
        _object(tuple_, "/tuple")
    redacted = _optional(top, "redacted", bool, "") or False
    raw_exchanges = top["exchanges"]
    if not isinstance(raw_exchanges, list):
        raise TranscriptError("/exchanges: expected an array")
    exchanges = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_exchanges):
        exchange = _exchange(raw, index)
        if exchange.id in seen:
            raise TranscriptError(f"/exchanges/{index}/id: duplicate exchange id {exchange.id!r}")
        seen.add(exchange.id)
        exchanges.append(exchange)
    return Transcript(profile, tuple_, tuple(exchanges), redacted)


def _exchange(raw: Any, index: int) -> Exchange:
    where = f"/exchanges/{index}"
    item = _object(raw, where)
    _keys(item, where, required={"id", "request"}, optional={"concurrent_group", "idempotent", "response"})
    ident = item["id"]
    if not isinstance(ident, str) or not ident or not ident.isprintable():
        raise TranscriptError(f"{where}/id: expected a non-empty string of printable characters")
    group = _optional(item, "concurrent_group", str, where)
    idempotent = _optional(item, "idempotent", bool, where) or False
    request = _request(item["request"], f"{where}/request")
    response = None if item.get("response") is None else _response(item["response"], f"{where}/response")
    return Exchange(ident, index, group, idempotent, request, response)


def _request(raw: Any, where: str) -> Request:
    item = _object(raw, where)
    _keys(item, where, required={"method"}, optional={"url", "headers", "body", "body_text"})
    method = item["method"]
    if not isinstance(method, str) or not method:
        raise TranscriptError(f"{where}/method: expected a non-empty string")
    if "body" in item and "body_text" in item:
        raise TranscriptError(f"{where}: give either body or body_text, not both")
    return Request(
        method=method,
        url=_optional(item, "url", str, where),
        headers=_headers(item.get("headers", {}), f"{where}/headers"),
        body=item.get("body", ABSENT),
        body_text=_optional(item, "body_text", str, where),
    )


def _response(raw: Any, where: str) -> Response:
    item = _object(raw, where)
    _keys(
        item,
        where,
        required={"status"},
        optional={"headers", "chunks", "chunks_b64", "body", "body_text", "disconnected", "truncated"},
    )
    status = item["status"]
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise TranscriptError(f"{where}/status: expected an integer HTTP status (100-599)")
    bodies = [key for key in ("chunks", "chunks_b64", "body", "body_text") if key in item]
    if len(bodies) > 1:
        raise TranscriptError(
            f"{where}: give one of chunks, chunks_b64, body, body_text (got {', '.join(bodies)})"
        )
    chunks = None
    if "chunks" in item:
        chunks = tuple(
            _text_chunk(c, f"{where}/chunks/{i}")
            for i, c in enumerate(_array(item["chunks"], f"{where}/chunks"))
        )
    elif "chunks_b64" in item:
        chunks = tuple(
            _b64_chunk(c, f"{where}/chunks_b64/{i}")
            for i, c in enumerate(_array(item["chunks_b64"], f"{where}/chunks_b64"))
        )
    truncated = item.get("truncated", 0)
    if isinstance(truncated, bool) or not isinstance(truncated, int) or truncated < 0:
        raise TranscriptError(f"{where}/truncated: expected the number of bytes left out (an integer >= 0)")
    return Response(
        status=status,
        headers=_headers(item.get("headers", {}), f"{where}/headers"),
        chunks=chunks,
        body=item.get("body", ABSENT),
        body_text=_optional(item, "body_text", str, where),
        disconnected=_optional(item, "disconnected", bool, where) or False,
        truncated=truncated,
    )


def _headers(raw: Any, where: str) -> Headers:
    item = _object(raw, where)
    fields = []
    for name, value in item.items():
        if not _TOKEN.fullmatch(name):
            raise TranscriptError(f"{where}: {name!r} is not a header name (RFC 9110 token)")
        values = value if isinstance(value, list) else [value]
        for one in values:
            if not isinstance(one, str):
                raise TranscriptError(f"{where}/{name}: expected a string or an array of strings")
            fields.append((name, one))
    return Headers(fields)


def _text_chunk(raw: Any, where: str) -> bytes:
    if not isinstance(raw, str):
        raise TranscriptError(f"{where}: expected a string")
    try:
        return raw.encode("utf-8")
    except UnicodeEncodeError:
        raise TranscriptError(f"{where}: a lone surrogate; use chunks_b64 for such bytes") from None


def _b64_chunk(raw: Any, where: str) -> bytes:
    if not isinstance(raw, str):
        raise TranscriptError(f"{where}: expected a base64 string")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise TranscriptError(f"{where}: not valid base64") from None


def _object(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise TranscriptError(f"{where or '/'}: expected an object")
    return raw


def _array(raw: Any, where: str) -> list[Any]:
    if not isinstance(raw, list):
        raise TranscriptError(f"{where}: expected an array")
    return raw


def _keys(item: dict[str, Any], where: str, *, required: set[str], optional: set[str]) -> None:
    for key in required:
        if key not in item:
            raise TranscriptError(f"{where or '/'}: missing {key!r}")
    for key in item:
        if key not in required and key not in optional and not key.startswith("x-"):
            raise TranscriptError(f"{where}/{key}: not a field of {FORMAT} (extensions start with 'x-')")


def _optional(item: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = item.get(key)
    if value is not None and not isinstance(value, kind):
        raise TranscriptError(f"{where}/{key}: expected {_NAMES[kind]}")
    return value


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_NAMES = {str: "a string", bool: "true or false", int: "an integer"}


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise TranscriptError(f"not standard JSON: the number {text[:40]} is out of range")
    return value


def _check_strings(value: Any, where: str) -> None:
    """Every string must be encodable as UTF-8: a lone surrogate (``"\\ud800"``) is not."""
    stack = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            _utf8(item, path)
        elif isinstance(item, dict):
            for key, child in item.items():
                _utf8(key, path)
                stack.append((child, f"{path}/{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{path}/{index}") for index, child in enumerate(item))


def _utf8(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise TranscriptError(
            f"{path or '/'}: a lone surrogate is not text (use chunks_b64 for such bytes)"
        ) from None


def _reject_constant(name: str) -> Any:
    raise TranscriptError(f"not standard JSON: {name} is not allowed")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise TranscriptError(f"duplicate key {key!r} in one JSON object")
        result[key] = value
    return result


# -- writing -----------------------------------------------------------------------


class Room:
    """What a writer may still keep of response bodies: per answer and in total (None: no
    limit). Shared by every record of one writer, so a recording stays bounded."""

    __slots__ = ("answer", "left")

    def __init__(self, answer: int | None, total: int | None) -> None:
        self.answer, self.left = answer, total


class ExchangeRecord:
    """One exchange being recorded: the request as sent, the response as it arrives.

    A response is ``disconnected`` until `end` says otherwise, so a stream the
    client abandoned (or that broke) is recorded as such without extra bookkeeping.
    Its body is kept whole chunk by whole chunk while the writer's `Room` allows; from the
    first chunk that does not fit, nothing more is kept and the bytes left out are counted
    (``truncated``): the kept chunks are the body's first bytes, with their real boundaries.
    """

    __slots__ = (
        "chunks",
        "concurrent_group",
        "disconnected",
        "id",
        "idempotent",
        "kept",
        "request",
        "response_headers",
        "room",
        "status",
        "truncated",
    )

    def __init__(
        self,
        ident: str,
        request: dict[str, Any],
        idempotent: bool | None,
        group: str | None,
        room: Room | None = None,
    ) -> None:
        self.id = ident
        self.request = request
        self.idempotent = idempotent
        self.concurrent_group = group
        self.status: int | None = None
        self.response_headers: dict[str, Any] = {}
        self.chunks: list[bytes] = []
        self.disconnected = True
        self.room = room or Room(None, None)
        self.kept = 0  # bytes of the body kept
        self.truncated = 0  # bytes of the body read after the cut, not kept

    def respond(self, status: int, headers: Iterable[tuple[str, str]]) -> None:
        self.status, self.response_headers = status, header_fields(headers)

    def chunk(self, data: bytes) -> None:
        """A piece of the body exactly as it was read off the connection: kept if it fits
        (and nothing was cut before it), else counted as left out."""
        if not data:
            return
        room = self.room
        fits = (room.answer is None or self.kept + len(data) <= room.answer) and (
            room.left is None or len(data) <= room.left
        )
        if self.truncated or not fits:
            self.truncated += len(data)
            return
        self.chunks.append(bytes(data))
        self.kept += len(data)
        if room.left is not None:
            room.left -= len(data)

    def end(self, *, disconnected: bool = False) -> None:
        self.disconnected = disconnected

    def as_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = {"id": self.id}
        if self.concurrent_group is not None:
            record["concurrent_group"] = self.concurrent_group
        if self.idempotent is not None:
            record["idempotent"] = self.idempotent
        record["request"] = self.request
        if self.status is not None:
            record["response"] = {
                "status": self.status,
                "headers": self.response_headers,
                **chunk_fields(self.chunks),
                "disconnected": self.disconnected,
                **({"truncated": self.truncated} if self.truncated else {}),
            }
        return record


class TranscriptWriter:
    """The one writer of ``ssewire-transcript/1``: the recorder, the probe and the tests
    all record through it, so repeated headers and chunk boundaries are kept alike.

    ``max_answer_bytes`` / ``max_total_bytes``: how much of response bodies it keeps, per
    answer and over all answers (None: all); a body cut short says so (``truncated``)."""

    def __init__(self, *, max_answer_bytes: int | None = None, max_total_bytes: int | None = None) -> None:
        self.records: list[ExchangeRecord] = []
        self.room = Room(max_answer_bytes, max_total_bytes)

    def request(
        self,
        method: str,
        url: str,
        headers: Iterable[tuple[str, str]],
        body: bytes | None = None,
        *,
        name: str | None = None,
        idempotent: bool | None = None,
        concurrent_group: str | None = None,
    ) -> ExchangeRecord:
        """Start an exchange; ``body`` is the request body as sent (JSON is kept parsed).

        ``name`` is the exchange id (default ``e1``, ``e2``, ...); it must be unique."""
        request: dict[str, Any] = {"method": method, "url": url, "headers": header_fields(headers)}
        if body:
            request.update(body_field(body))
        ident = name or f"e{len(self.records) + 1}"
        if any(record.id == ident for record in self.records):
            raise ValueError(f"exchange id {ident!r} is already recorded")
        record = ExchangeRecord(ident, request, idempotent, concurrent_group, self.room)
        self.records.append(record)
        return record

    def document(self, profile: str, **tuple_: str) -> dict[str, Any]:
        document: dict[str, Any] = {"format": FORMAT, "profile": profile}
        if tuple_:
            document["tuple"] = tuple_
        document["exchanges"] = [record.as_dict() for record in self.records]
        return document


def header_fields(headers: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Header pairs as transcript headers: a repeated field becomes an array (never dropped)."""
    out: dict[str, Any] = {}
    for name, value in headers:
        if name in out:
            out[name] = [*out[name], value] if isinstance(out[name], list) else [out[name], value]
        else:
            out[name] = value
    return out


def body_field(data: bytes) -> dict[str, Any]:
    """A request body: parsed JSON when it is strict JSON, else its text (invalid UTF-8 replaced)."""
    try:
        return {"body": loads_document(data)}
    except TranscriptError:
        return {"body_text": data.decode("utf-8", "replace")}


def chunk_fields(chunks: list[bytes]) -> dict[str, Any]:
    """Response chunks as text when every one is UTF-8 on its own, else base64."""
    try:
        return {"chunks": [chunk.decode("utf-8") for chunk in chunks]}
    except UnicodeDecodeError:  # a chunk split inside a character, or not UTF-8 at all
        return {"chunks_b64": [base64.b64encode(chunk).decode("ascii") for chunk in chunks]}
