"""``ssewire decode``: an SSE byte stream to one JSON line per event (or per JSON-RPC item)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from ._common import EXIT_FINDINGS, EXIT_OK, cannot, positive_int, write

NAME = "decode"
EXTRA: str | None = None


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        NAME,
        help="decode an SSE byte stream to one JSON object per event",
        description="Read an SSE byte stream and write one JSON line per event "
        '({"type", "data", "id"}) to stdout. Exit 1 if an event was dropped by a size limit, '
        "the stream ended inside an event, or (with --jsonrpc) an item was invalid.",
    )
    parser.add_argument("file", nargs="?", default="-", help="a file, or - for stdin (default)")
    parser.add_argument(
        "--chunk-size",
        type=positive_int,
        default=65536,
        metavar="N",
        help="feed the decoder at most N bytes at a time (default 65536)",
    )
    parser.add_argument(
        "--jsonrpc",
        action="store_true",
        help="parse each event as a JSON-RPC message: one line per message "
        "(kind, id, method, size) and per invalid item; exit 1 if any was invalid",
    )
    for option, what in (("--max-event-size", "event's data"), ("--max-line-size", "line")):
        parser.add_argument(
            option,
            type=positive_int,
            default=None,
            metavar="BYTES",
            help=f"drop (and report) any {what} over BYTES (default 64 MiB)",
        )


def event_line(event: Any) -> dict[str, Any]:
    return {"type": event.type, "data": event.data, "id": event.id}


def item_line(item: Any) -> dict[str, Any]:
    from ..jsonrpc import InvalidMessage, Message, Priming, TornTail

    if isinstance(item, Message):
        return {
            "kind": item.kind,
            "id": item.id,
            "method": item.method,
            "size": item.size,
            "event_id": item.event_id,
        }
    if isinstance(item, InvalidMessage):
        return {
            "kind": "invalid",
            "reason": item.reason,
            "event_id": item.event_id,
            "size": item.size,
            "excerpt": item.excerpt,
        }
    if isinstance(item, Priming):
        return {"kind": "priming", "event_id": item.event_id}
    if isinstance(item, TornTail):
        return {"kind": "torn", "discarded": item.discarded, "event_id": item.event_id}
    return {"kind": "event", "type": item.event_type, "event_id": item.event_id, "size": len(item.data)}


def _open(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise cannot("read", path, exc) from None


def run(args: argparse.Namespace) -> int:
    from .._errors import EventTooLarge
    from .._select import Decoder

    limits = {
        name: value
        for name, value in (("max_event_size", args.max_event_size), ("max_line_size", args.max_line_size))
        if value is not None
    }
    if args.jsonrpc:
        from ..jsonrpc import InvalidMessage, MessageDecoder, TornTail

        decoder: Any = MessageDecoder(**limits)
        describe: Callable[[Any], dict[str, Any]] = item_line
        problem_types: tuple[type, ...] = (InvalidMessage, TornTail)
    else:
        decoder, describe, problem_types = Decoder(**limits), event_line, ()
    problems = 0

    def emit(items: list[Any]) -> bool:
        nonlocal problems
        problems += sum(isinstance(item, problem_types) for item in items)
        lines = b"".join(
            json.dumps(describe(item), ensure_ascii=False).encode("utf-8") + b"\n" for item in items
        )
        return write(lines)

    with _open(args.file) as source:
        while True:
            try:
                chunk = source.read1(args.chunk_size)  # type: ignore[attr-defined]
            except OSError as exc:
                raise cannot("read", args.file, exc) from None
            if not chunk:
                break
            try:
                items = decoder.feed(chunk)
            except EventTooLarge as error:  # the core decoder only: events are on the error
                items = error.events
                print(f"ssewire decode: {error}", file=sys.stderr)
                problems += 1
            if not emit(items):
                return EXIT_FINDINGS if problems else EXIT_OK  # the reader stopped reading
    emit(decoder.close())
    if not args.jsonrpc and decoder.discarded:
        print(
            f"ssewire decode: the stream ended inside an event ({decoder.discarded} bytes not dispatched)",
            file=sys.stderr,
        )
        problems += 1
    return EXIT_FINDINGS if problems else EXIT_OK
