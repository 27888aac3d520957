"""The ``ssewire`` command line. Thin: argument parsing and I/O around the library.

Exit codes: 0 clean; 1 findings (decode: an event dropped by a size limit, an invalid
JSON-RPC message with --jsonrpc, or the stream ended inside an event; validate: an
error-level finding or a stale baseline entry); 2 unreadable input or bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import BinaryIO

from ._errors import EventTooLarge
from ._select import Decoder

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
    decode.add_argument(
        "--jsonrpc",
        action="store_true",
        help="parse each event as a JSON-RPC message: one line per message "
        "(kind, id, method, size) and per invalid item; exit 1 if any was invalid",
    )
    for option, what in (("--max-event-size", "event's data"), ("--max-line-size", "line")):
        decode.add_argument(
            option,
            type=_positive_int,
            default=None,
            metavar="BYTES",
            help=f"drop (and report) any {what} over BYTES (default 64 MiB)",
        )
    validate = commands.add_parser(
        "validate",
        help="check a recorded MCP Streamable HTTP transcript against a protocol revision",
        description="Check an ssewire-transcript/1 file against one MCP revision. Exit 0: no "
        "error-level finding (or all baselined); 1: findings or a stale baseline entry; 2: "
        "unreadable or invalid input.",
    )
    validate.add_argument("file", help="the transcript (JSON), or - for stdin")
    validate.add_argument(
        "--profile",
        metavar="P",
        help="2025-03-26, 2025-06-18, 2025-11-25 or 2026-07-28 (default: the transcript's)",
    )
    validate.add_argument("--format", choices=("text", "json", "junit"), default="text")
    validate.add_argument("--baseline", metavar="FILE", help="expected findings (ssewire-baseline/1)")
    validate.add_argument(
        "--write-baseline",
        metavar="FILE",
        help="also write a baseline accepting every error and warning found",
    )
    redact = commands.add_parser(
        "redact",
        help="mask the credentials, session ids and event ids of a transcript",
        description="Write a copy of a transcript with credentials masked and session / event "
        "ids replaced consistently (session-A, event-1, ...).",
    )
    redact.add_argument("input", help="the transcript, or - for stdin")
    redact.add_argument("output", help="where to write the redacted transcript, or - for stdout")
    return parser


def _open(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    return open(path, "rb")  # noqa: SIM115 - closed by the caller


def _event_line(event) -> dict:
    return {"type": event.type, "data": event.data, "id": event.id}


def _item_line(item) -> dict:
    from .jsonrpc import InvalidMessage, Message, Priming, TornTail

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
        return {"kind": "torn", "discarded": item.discarded}
    return {"kind": "event", "type": item.event_type, "event_id": item.event_id, "size": len(item.data)}


def _decode(args: argparse.Namespace) -> int:
    try:
        source = _open(args.file)
    except OSError as exc:
        print(f"ssewire decode: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INPUT
    limits = {
        name: value
        for name, value in (("max_event_size", args.max_event_size), ("max_line_size", args.max_line_size))
        if value is not None
    }
    if args.jsonrpc:
        from .jsonrpc import InvalidMessage, MessageDecoder, TornTail

        decoder = MessageDecoder(**limits)
        describe = _item_line
    else:
        decoder = Decoder(**limits)
        describe = _event_line
    out = sys.stdout.buffer
    problems = 0

    def emit(items) -> None:
        nonlocal problems
        for item in items:
            if args.jsonrpc and isinstance(item, (InvalidMessage, TornTail)):
                problems += 1
            line = json.dumps(describe(item), ensure_ascii=False)
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
            except EventTooLarge as error:  # the core decoder only: events are on the error
                emit(error.events)
                print(f"ssewire decode: {error}", file=sys.stderr)
                problems += 1
    emit(decoder.close())
    if not args.jsonrpc and decoder.discarded:
        print(
            f"ssewire decode: the stream ended inside an event ({decoder.discarded} bytes not dispatched)",
            file=sys.stderr,
        )
        problems += 1
    return EXIT_FINDINGS if problems else EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    from .mcp import TranscriptError, UnknownProfile, load, validate
    from .mcp.report import (
        BaselineError,
        Outcome,
        baseline_document,
        load_baseline,
        to_json,
        to_junit,
        to_text,
    )

    try:
        transcript = load(args.file)
        result = validate(transcript, args.profile)
        baseline = load_baseline(args.baseline) if args.baseline else None
    except (TranscriptError, UnknownProfile, BaselineError) as exc:
        print(f"ssewire validate: {exc}", file=sys.stderr)
        return EXIT_INPUT
    outcome = Outcome.of(result, baseline)
    source = "<stdin>" if args.file == "-" else args.file
    exchanges = len(transcript.exchanges)
    if args.format == "json":
        text = json.dumps(to_json(outcome, exchanges), indent=2, ensure_ascii=False) + "\n"
    elif args.format == "junit":
        text = to_junit(outcome, source, [ex.id for ex in transcript.exchanges])
    else:
        text = to_text(outcome, source, exchanges)
    sys.stdout.write(text)
    sys.stdout.flush()
    if args.write_baseline:
        try:
            with open(args.write_baseline, "w", encoding="utf-8") as handle:
                json.dump(baseline_document(result), handle, indent=2)
                handle.write("\n")
        except OSError as exc:
            print(
                f"ssewire validate: cannot write {args.write_baseline}: {exc.strerror or exc}",
                file=sys.stderr,
            )
            return EXIT_INPUT
    return EXIT_OK if outcome.passed else EXIT_FINDINGS


def _redact(args: argparse.Namespace) -> int:
    from .mcp import TranscriptError
    from .mcp.redact import redact
    from .mcp.transcript import load_document

    try:
        redacted = redact(load_document(args.input))
    except TranscriptError as exc:
        print(f"ssewire redact: {exc}", file=sys.stderr)
        return EXIT_INPUT
    text = json.dumps(redacted, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
        return EXIT_OK
    try:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        print(f"ssewire redact: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INPUT
    return EXIT_OK


_COMMANDS = {"decode": _decode, "validate": _validate, "redact": _redact}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as the Python docs advise.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FINDINGS


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
