"""A JSON-RPC message's envelope, read without building its body.

A relay needs of a multi-megabyte message only its envelope (``jsonrpc``, ``id``,
``method``, ``error``) and the body's bytes, to write on. `read` checks the whole
document as JSON (msgspec skips each member it is not asked to build; the bytes are
checked as UTF-8, which msgspec does not do while skipping) and returns the top-level
object with an object or array ``params`` / ``result`` as a `Body`: a view of the bytes it
came in (no copy: it keeps the event's data alive, and nothing more), which `encoded`
splices back verbatim (one copy) and ``orjson.dumps(..., default=written)`` writes too.
Every other member is parsed by orjson, as the whole message would have been.

None means "not read here": the data is not a JSON object (a batch, say), or is not
valid JSON. The caller then parses it whole, so what is refused, and why, is orjson's
verdict alone. Two differences are left, both valid JSON past orjson's own limits (RFC
8259 section 9 lets a parser set them), which this reader, never reading a body, lets
through as bytes: a number beyond the range of a float (``1e400``) inside a body, and a body
nested deeper than orjson's 1024 levels where msgspec goes deeper (it stops at the
interpreter's recursion limit: 1000 levels before Python 3.12, far more from 3.12). Such a
body relayed as it came is the next reader's to judge; `parsed` refuses it as orjson does.
"""

from __future__ import annotations

import codecs
from typing import Any

import orjson

try:
    import msgspec
except ImportError:  # pragma: no cover - an extra: the caller says which
    msgspec = None  # type: ignore[assignment]

__all__ = [
    "AVAILABLE",
    "BODIES",
    "Body",
    "dumps",
    "encoded",
    "parsed",
    "read",
    "readdressed",
    "require",
    "shape",
    "written",
]

AVAILABLE = msgspec is not None
BODIES = ("params", "result")  # the members kept as bytes
_PROGRESS = "notifications/progress"  # its params carry the progress token: always read
_members: Any = msgspec.json.Decoder(dict[str, msgspec.Raw]) if msgspec is not None else None
_Fragment = orjson.Fragment
_loads = orjson.loads


def dumps(value: Any) -> bytes:
    """``orjson.dumps``, right-sized. orjson (3.12 on) hands back its working buffer as the
    bytes: 4 KiB at least, up to twice the length above that, so a short message kept in a
    stream's log held 25 times what the log's budget counts. One copy (about 60 ns for a
    short message) makes what is kept cost what it says."""
    return b"".join((orjson.dumps(value), b""))


class Body:
    """A JSON value (an object or an array) kept as the bytes it came in (``data``, a
    read-only view): `parsed` reads it, `encoded` and ``orjson.dumps(..., default=written)``
    write it back (anything else that meets it refuses it as a type it cannot write: never
    a silent change)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"Body({len(self.data)} bytes)"


_CONTAINERS = (ord("{"), ord("["))
_Utf8Decoder = codecs.getincrementaldecoder("utf-8")
_UTF8_SLICE = 1 << 20


def require() -> None:
    """Raise ImportError, naming the extra, when msgspec is missing: for an option that
    reads envelopes, before anything is sent or read."""
    if not AVAILABLE:
        raise ImportError("raw_above reads envelopes with msgspec: pip install 'ssewire[mcp]' (or msgspec)")


def read(data: bytes | bytearray) -> dict[str, Any] | None:
    """The top-level object of ``data``, its bodies left as bytes; None to parse it whole."""
    try:
        members = _members.decode(data)
    except (msgspec.DecodeError, RecursionError):  # not an object, or not JSON
        return None
    if not data.isascii() and not _utf8(data):  # msgspec does not check the strings it skips
        return None
    message: dict[str, Any] = {}
    try:
        progress = "method" in members and _loads(bytes(members["method"])) == _PROGRESS
        for name, raw in members.items():
            if name in BODIES and not (progress and name == "params"):
                kept = memoryview(raw)  # the value alone (msgspec leaves the space around it out)
                message[name] = Body(kept) if kept[0] in _CONTAINERS else _loads(kept)
            else:
                message[name] = _loads(bytes(raw))
    except orjson.JSONDecodeError:  # a member orjson refuses (a number past the float range)
        return None
    return message


_ANY = object()


def readdressed(data: bytes | bytearray, ident: Any, *, was: Any = _ANY) -> bytes | None:
    """``data`` (one JSON-RPC message) under the id ``ident``, every other member the bytes
    it came in (a relay's re-issue changes nothing else: no number reparsed). With ``was``,
    only a response (``result`` or ``error``) whose id is ``was``. None otherwise, or when it
    is no JSON object. Without msgspec the members are parsed and written by orjson."""
    if _members is None:  # pragma: no cover - the mcp extra brings msgspec
        try:
            message = _loads(data)
        except orjson.JSONDecodeError:
            return None
        members = message if isinstance(message, dict) else None
        kept = members
    else:
        try:
            members = _members.decode(data)
        except (msgspec.DecodeError, RecursionError):
            return None
        kept = {name: _Fragment(bytes(raw)) for name, raw in members.items()}
    if members is None or kept is None:
        return None
    if was is not _ANY:
        if ("result" not in members and "error" not in members) or "id" not in members:
            return None
        try:
            found = members["id"] if _members is None else _loads(bytes(members["id"]))
        except orjson.JSONDecodeError:
            return None
        if found != was:
            return None
    kept["id"] = ident
    return dumps(kept)


def _utf8(data: bytes | bytearray) -> bool:
    """Whether ``data`` is UTF-8, checked a slice at a time (no str of the whole body)."""
    decoder = _Utf8Decoder()
    view = memoryview(data)
    try:
        for at in range(0, len(view), _UTF8_SLICE):
            decoder.decode(view[at : at + _UTF8_SLICE])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def shape(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with each body kept as bytes replaced by an empty value of its JSON type:
    what a check of the envelope needs to see of it."""
    kept = {name: value for name, value in message.items() if type(value) is Body}
    if not kept:
        return message
    return {**message, **{name: {} if value.data[0] == 0x7B else [] for name, value in kept.items()}}


def parsed(value: Any) -> Any:
    """A member as a value: a body kept as bytes is parsed now (by orjson); anything else
    is returned as it is."""
    return _loads(value.data) if type(value) is Body else value


def written(value: Any) -> Any:
    """``orjson.dumps``'s ``default``: a `Body` is written as the bytes it came in."""
    if type(value) is Body:
        return _Fragment(bytes(value.data))
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def encoded(message: dict[str, Any]) -> bytes:
    """``message`` as JSON, each `Body` spliced in as it came (one copy of its bytes, where
    ``orjson.dumps`` with a fragment takes two); the bodies are written last."""
    try:
        return dumps(message)  # no Body in it (orjson refuses one): the usual case, no scan
    except orjson.JSONEncodeError:
        bodies = [(name, value.data) for name, value in message.items() if type(value) is Body]
        if not bodies:
            raise
    head = orjson.dumps({name: value for name, value in message.items() if type(value) is not Body})
    pieces: list[bytes | memoryview] = [head[:-1]]
    comma = b"," if len(head) > 2 else b""
    for name, data in bodies:
        pieces += (comma, orjson.dumps(name), b":", data)
        comma = b","
    pieces.append(b"}")
    return b"".join(pieces)
