"""``ssewire validate``: check a recorded MCP transcript against one protocol revision."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._common import EXIT_FINDINGS, EXIT_OK, add_report_options, cannot, write

NAME = "validate"
EXTRA: str | None = None


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        NAME,
        help="check a recorded MCP Streamable HTTP transcript against a protocol revision",
        description="Check an ssewire-transcript/1 file against one MCP revision. Exit 0: no "
        "failing finding (error level, or warning level too with --fail-on warning), or all "
        "baselined; 1: failing findings or a stale baseline entry; 2: unreadable or invalid input.",
    )
    parser.add_argument("file", help="the transcript (JSON), or - for stdin")
    parser.add_argument(
        "--profile",
        metavar="P",
        help="2025-03-26, 2025-06-18, 2025-11-25 or 2026-07-28 (default: the transcript's)",
    )
    add_report_options(parser)
    parser.add_argument("--baseline", metavar="FILE", help="expected findings (ssewire-baseline/1)")
    parser.add_argument(
        "--write-baseline",
        metavar="FILE",
        help="also write a baseline accepting every error and warning found",
    )


def run(args: argparse.Namespace) -> int:
    from ..mcp import Level, load, validate
    from ..mcp.validator.baseline import baseline_document, load_baseline, outcome

    transcript = load(args.file)
    result = validate(transcript, args.profile)
    baseline = load_baseline(args.baseline) if args.baseline else None
    source = "<stdin>" if args.file == "-" else args.file
    report = outcome(result, baseline, fail_on=Level(args.fail_on), source=source, transcript=transcript)
    text = report.render(args.format)
    code = EXIT_OK if report.passed else EXIT_FINDINGS
    write(text)  # a reader that went away changes nothing about the verdict
    if args.write_baseline:
        try:
            with open(args.write_baseline, "w", encoding="utf-8") as handle:
                json.dump(baseline_document(result), handle, indent=2)
                handle.write("\n")
        except OSError as exc:
            raise cannot("write", args.write_baseline, exc) from None
    return code
