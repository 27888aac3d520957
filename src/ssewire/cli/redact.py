"""``ssewire redact``: a copy of a transcript with its secrets masked."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import EXIT_OK, cannot, write

NAME = "redact"
EXTRA: str | None = None


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        NAME,
        help="mask the credentials, session ids and event ids of a transcript",
        description="Write a copy of a transcript with credentials masked and session / event "
        "ids replaced consistently (session-A, event-1, ...).",
    )
    parser.add_argument("input", help="the transcript, or - for stdin")
    parser.add_argument("output", help="where to write the redacted transcript, or - for stdout")


def run(args: argparse.Namespace) -> int:
    from ..mcp.transcript import load_document
    from ..mcp.transcript.redact import redact

    text = json.dumps(redact(load_document(args.input)), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if args.output == "-":
        write(text)
        return EXIT_OK
    try:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise cannot("write", args.output, exc) from None
    return EXIT_OK
