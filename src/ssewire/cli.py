"""The ``ssewire`` command line. Thin: argument parsing and I/O around the library.

Exit codes: 0 clean, 1 the stream had a problem worth a look (an event dropped by a
size limit, or the stream ended inside an event), 2 unreadable input or bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import BinaryIO

from . import Decoder, EventTooLarge

EXIT_OK, EXIT_FINDINGS, EXIT_INPUT = 0, 1, 2


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ssewire", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    decode = commands.add_parser(
        "decode",
        help="decode an SSE byte stream to one JSON object per event",
        description="Read an SSE byte stream and write one JSON line per event "
        '({"type", "data", "id"}) to stdout.',
    )
    decode.add_argument("file", nargs="?", default="-", help="a file, or - for stdin (default)")
    decode.add_argument(
        "--chunk-size",
        type=_positive_int,
        default=65536,
        metavar="N",
        help="feed the decoder at most N bytes at a time (default 65536)",
    )
    for option, what in (("--max-event-size", "event's data"), ("--max-line-size", "line")):
        decode.add_argument(
            option,
            type=_positive_int,
            default=None,
            metavar="BYTES",
            help=f"drop (and report) any {what} over BYTES (default 64 MiB)",
        )
    return parser


def _open(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    return open(path, "rb")  # noqa: SIM115 - closed by the caller


def _decode(args: argparse.Namespace) -> int:
    try:
        source = _open(args.file)
    except OSError as exc:
        print(f"ssewire decode: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INPUT
    out = sys.stdout.buffer
    limits = {
        name: value
        for name, value in (("max_event_size", args.max_event_size), ("max_line_size", args.max_line_size))
        if value is not None
    }
    decoder = Decoder(**limits)
    status = EXIT_OK

    def emit(events) -> None:
        for event in events:
            line = json.dumps({"type": event.type, "data": event.data, "id": event.id}, ensure_ascii=False)
            out.write(line.encode("utf-8") + b"\n")
        out.flush()

    with source:
        while True:
            try:
                chunk = source.read1(args.chunk_size)  # type: ignore[attr-defined]
            except OSError as exc:
                print(f"ssewire decode: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
                return EXIT_INPUT
            if not chunk:
                break
            try:
                emit(decoder.feed(chunk))
            except EventTooLarge as error:
                emit(error.events)
                print(f"ssewire decode: {error}", file=sys.stderr)
                status = EXIT_FINDINGS
    emit(decoder.close())
    if decoder.discarded:
        print(
            f"ssewire decode: the stream ended inside an event "
            f"({decoder.discarded} bytes not dispatched)",
            file=sys.stderr,
        )
        status = EXIT_FINDINGS
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _decode(args)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as the Python docs advise.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FINDINGS


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
