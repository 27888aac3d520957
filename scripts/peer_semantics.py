"""How the Python SSE parsers people use read the same tricky streams, next to the spec.

Each input is fed, chunk by chunk as listed, to each peer through its public streaming API
(an in-memory response, so the chunk boundaries are exactly these): httpx-sse, httpx2,
sseclient-py, requests-sse, the SDK line-splitting pattern (bench/peers.py) and ssewire.
The expected reading is written below from the WHATWG text, not taken from any parser.

    python scripts/peer_semantics.py           # rewrite the table in docs/semantics.md
    python scripts/peer_semantics.py --check   # exit 1 if the page is out of date

Needs the ``docs`` extra (``pip install '.[docs]'``), which pins the peers' versions so the
table is reproducible.
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "semantics.md"
START, END = "<!-- peer-table:start -->", "<!-- peer-table:end -->"

Reading = tuple[list[tuple[str, str, str]], "int | None"]  # (type, data, id) per event; retry


@dataclass(frozen=True)
class Case:
    name: str
    chunks: list[bytes]
    events: list[tuple[str, str, str]]  # what the spec dispatches
    retry: int | None = None  # the reconnection time the spec leaves set (None: untouched)


M = "message"
CASES = [
    Case("BOM at stream start", [b"\xef\xbb\xbfdata: a\n\n"], [(M, "a", "")]),
    Case("BOM split across chunks", [b"\xef\xbb", b"\xbfdata: a\n\n"], [(M, "a", "")]),
    Case("CR at a chunk end, LF in the next", [b"data: a\r", b"\ndata: b\r\n\r\n"], [(M, "a\nb", "")]),
    Case("CR-only line ends", [b"data: a\rdata: b\r\r"], [(M, "a\nb", "")]),
    Case(
        "U+2028, U+0085, VT, FF in data",
        ["data: a\u2028b\u0085c\x0bd\x0ce\n\n".encode()],
        [(M, "a\u2028b\u0085c\x0bd\x0ce", "")],
    ),
    Case("an id-only block dispatches nothing", [b"id: 7\n\ndata: x\n\n"], [(M, "x", "7")]),
    Case("`retry` with non-digits is ignored", [b"retry: 10s\ndata: x\n\n"], [(M, "x", "")]),
    Case("a torn final event is dropped", [b"data: a\n\ndata: torn"], [(M, "a", "")]),
]


class _StopReading(Exception):
    pass


def _events(found: Iterable[object], type_of: Callable[[object], str | None]) -> list[tuple[str, str, str]]:
    return [
        (type_of(e) or M, e.data, getattr(e, "id", None) or getattr(e, "last_event_id", "") or "")
        for e in found
    ]  # type: ignore[attr-defined]


def read_ssewire(chunks: list[bytes]) -> Reading:
    import ssewire

    decoder = ssewire.Decoder()
    events = [e for chunk in chunks for e in decoder.feed(chunk)] + decoder.close()
    return [(e.type, e.data, e.id) for e in events], decoder.retry


def read_httpx_sse(chunks: list[bytes]) -> Reading:
    import httpx
    import httpx_sse

    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=iter(chunks))
    found = list(httpx_sse.EventSource(response).iter_sse())
    retry = next((e.retry for e in reversed(found) if e.retry is not None), None)
    return _events(found, lambda e: e.event), retry  # type: ignore[attr-defined]


def read_httpx2(chunks: list[bytes]) -> Reading:
    import httpx2

    request = httpx2.Request("GET", "http://127.0.0.1/")
    response = httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content=iter(chunks), request=request
    )
    found = list(httpx2.EventSource(response))
    retry = next((e.retry for e in reversed(found) if e.retry is not None), None)
    return _events(found, lambda e: e.event), retry  # type: ignore[attr-defined]


def read_sseclient(chunks: list[bytes]) -> Reading:
    from sseclient import SSEClient

    found = list(SSEClient(iter(chunks)).events())
    retry = next((e.retry for e in reversed(found) if e.retry is not None), None)
    return _events(found, lambda e: e.event), retry  # type: ignore[attr-defined]


def read_requests_sse(chunks: list[bytes]) -> Reading:
    """Through requests itself: an adapter hands over a response whose body is the chunks."""
    import requests
    from requests.adapters import BaseAdapter
    from requests_sse import EventSource

    class Body:
        def __init__(self) -> None:
            self.pieces = iter(chunks)

        def read(self, amount: int = -1) -> bytes:
            return next(self.pieces, b"")

        def close(self) -> None:
            pass

    class Adapter(BaseAdapter):
        def send(self, request, **kwargs):  # type: ignore[no-untyped-def]
            response = requests.Response()
            response.status_code, response.url, response.request = 200, request.url, request
            response.headers["Content-Type"] = "text/event-stream"
            response.raw = Body()
            return response

        def close(self) -> None:
            pass

    def stop() -> None:  # called where it would reconnect: the stream has ended
        raise _StopReading

    session = requests.Session()
    session.mount("http://", Adapter())
    found, retry = [], None
    with EventSource("http://127.0.0.1/", session=session, on_error=stop) as source:
        try:
            for event in source:
                found.append(event)
        except _StopReading:
            pass
        if source._reconnection_time != source._orginal_reconnection_time:
            retry = int(source._reconnection_time.total_seconds() * 1000)
    return _events(found, lambda e: e.type), retry  # type: ignore[attr-defined]


def read_sdk_pattern(chunks: list[bytes]) -> Reading:
    sys.path.insert(0, str(ROOT / "bench"))
    from peers import SDKPatternDecoder

    found = list(SDKPatternDecoder().iter_bytes(chunks))
    retry = next((e.retry for e in reversed(found) if e.retry is not None), None)
    return _events(found, lambda e: e.event), retry  # type: ignore[attr-defined]


PEERS: list[tuple[str, str, Callable[[list[bytes]], Reading]]] = [
    ("ssewire", "ssewire", read_ssewire),
    ("httpx-sse", "httpx-sse", read_httpx_sse),
    ("httpx2", "httpx2", read_httpx2),
    ("sseclient-py", "sseclient-py", read_sseclient),
    ("requests-sse", "requests-sse", read_requests_sse),
    ("SDK pattern", "", read_sdk_pattern),
]


def _show(events: list[tuple[str, str, str]], retry: int | None) -> str:
    parts = []
    for kind, data, ident in events:
        text = repr(data) if kind == M else f"{kind}:{data!r}"
        parts.append(text + (f" id={ident}" if ident else ""))
    shown = ", ".join(parts) or "no event"
    if retry is not None:
        shown += f"; retry={retry}"
    return shown.replace("|", "\\|")


def cell(case: Case, read: Callable[[list[bytes]], Reading]) -> str:
    try:
        events, retry = read(case.chunks)
    except Exception as exc:  # a peer that raises on valid input: that is its answer
        return f"raises {type(exc).__name__}"
    if (events, retry) == (case.events, case.retry):
        return "✓"
    return _show(events, retry)


def table() -> str:
    versions = []
    for name, dist, _ in PEERS:
        if dist:
            versions.append(f"{name} {importlib.metadata.version(dist)}")
    lines = [
        "| input | the spec | " + " | ".join(name for name, _, _ in PEERS) + " |",
        "|---|---|" + "---|" * len(PEERS),
    ]
    for case in CASES:
        cells = [cell(case, read) for _, _, read in PEERS]
        lines.append(f"| {case.name} | {_show(case.events, case.retry)} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        "✓: as the spec reads it. Versions: "
        + ", ".join(versions)
        + ". Generated by `scripts/peer_semantics.py`."
    )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    page = PAGE.read_text(encoding="utf-8")
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    updated = f"{head}{START}\n{table()}\n{END}{tail}"
    if "--check" in argv:
        if updated != page:
            print(
                f"{PAGE.relative_to(ROOT)} is out of date: run python scripts/peer_semantics.py",
                file=sys.stderr,
            )
            return 1
        print(f"{PAGE.relative_to(ROOT)}: the peer table is up to date")
        return 0
    PAGE.write_text(updated, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
