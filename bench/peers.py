"""Every decoder the suite times, behind one signature: ``run(chunks) -> (events, data size)``.

The data size (the sum of ``len(event.data)``) is how a run proves it decoded the data, not
only counted events: a decoder that truncated or dropped data fails the check. Its cost
(one ``len`` per event) is the same for every contender.

Peers are driven the way their own streaming code drives them (bytes -> incremental
UTF-8 text -> lines -> events for the httpx family). A peer that is not installed is
listed with the reason, and its benchmarks are reported as skipped.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import ssewire

Runner = Callable[[Iterable[bytes]], tuple[int, int]]


@dataclass(frozen=True)
class Contender:
    name: str
    ours: bool
    run: Runner | None
    missing: str = ""


def _ssewire(cls: type | None) -> Runner | None:
    if cls is None:
        return None

    def run(chunks: Iterable[bytes]) -> tuple[int, int]:
        decoder = cls(max_event_size=None, max_line_size=None)
        n = size = 0
        for chunk in chunks:
            for event in decoder.feed(chunk):
                n += 1
                size += len(event.data)
        decoder.close()
        return n, size

    return run


def _text(chunks: Iterable[bytes]):
    """Incremental UTF-8 text, as httpx's ``iter_text`` yields it (empty pieces dropped)."""
    decode = codecs.getincrementaldecoder("utf-8")("replace").decode
    for chunk in chunks:
        text = decode(chunk)
        if text:
            yield text


def _httpx_sse() -> Runner:
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    def run(chunks: Iterable[bytes]) -> tuple[int, int]:
        lines, events, n, size = SSELineDecoder(), SSEDecoder(), 0, 0
        for text in _text(chunks):
            for line in lines.decode(text):
                event = events.decode(line)
                if event is not None:
                    n += 1
                    size += len(event.data)
        for line in lines.flush():
            event = events.decode(line)
            if event is not None:
                n += 1
                size += len(event.data)
        return n, size

    return run


def _httpx2() -> Runner:
    from httpx2._sse import _SSEParser

    def run(chunks: Iterable[bytes]) -> tuple[int, int]:
        parser, n, size = _SSEParser(None), 0, 0
        for text in _text(chunks):
            for event in parser.decode(text):
                n += 1
                size += len(event.data)
        for event in parser.flush():
            n += 1
            size += len(event.data)
        return n, size

    return run


def _tally(events: Iterable) -> tuple[int, int]:
    n = size = 0
    for event in events:
        n += 1
        size += len(event.data)
    return n, size


def _sseclient() -> Runner:
    from sseclient import SSEClient

    def run(chunks: Iterable[bytes]) -> tuple[int, int]:
        return _tally(SSEClient(iter(chunks)).events())

    return run


class _SDKEvent:
    __slots__ = ("data", "event", "id", "retry")

    def __init__(self, event, data, id, retry):
        self.event, self.data, self.id, self.retry = event, data, id, retry


class SDKPatternDecoder:
    """The decoder many SDKs carry in a ``_streaming.py``, rewritten here from its shape:
    gather bytes until they end with a blank line, ``splitlines()`` that block, decode
    each line as UTF-8 and apply the field rules line by line."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None

    def iter_bytes(self, chunks: Iterable[bytes]):
        for block in self._blocks(chunks):
            for raw in block.splitlines():
                event = self.decode(raw.decode("utf-8"))
                if event is not None:
                    yield event

    @staticmethod
    def _blocks(chunks: Iterable[bytes]):
        pending = b""
        for chunk in chunks:
            for piece in chunk.splitlines(keepends=True):
                pending += piece
                if pending.endswith((b"\r\r", b"\n\n", b"\r\n\r\n")):
                    yield pending
                    pending = b""
        if pending:
            yield pending

    def decode(self, line: str) -> _SDKEvent | None:
        if not line:
            if not (self._event or self._data or self._id or self._retry is not None):
                return None
            event = _SDKEvent(self._event, "\n".join(self._data), self._id, self._retry)
            self._event, self._data, self._retry = None, [], None
            return event
        if line[0] == ":":
            return None
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            try:
                self._retry = int(value)
            except ValueError:
                pass
        return None


def _sdk_pattern() -> Runner:
    def run(chunks: Iterable[bytes]) -> tuple[int, int]:
        return _tally(SDKPatternDecoder().iter_bytes(chunks))

    return run


def _optional(name: str, factory: Callable[[], Runner]) -> Contender:
    try:
        return Contender(name, False, factory())
    except ImportError as exc:
        return Contender(name, False, None, f"not installed ({exc.name})")


def contenders() -> list[Contender]:
    return [
        Contender("ssewire CDecoder", True, _ssewire(ssewire.CDecoder), "compiled twin not built"),
        Contender("ssewire PyDecoder", True, _ssewire(ssewire.PyDecoder)),
        Contender("ssewire CRawDecoder", True, _ssewire(ssewire.CRawDecoder), "compiled twin not built"),
        Contender("ssewire PyRawDecoder", True, _ssewire(ssewire.PyRawDecoder)),
        _optional("httpx-sse", _httpx_sse),
        _optional("httpx2 SSE", _httpx2),
        _optional("sseclient-py", _sseclient),
        Contender("SDK pattern", False, _sdk_pattern()),
    ]
