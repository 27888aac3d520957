"""``ssewire serve``: the reference MCP server, optionally with faults, on 127.0.0.1."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import EXIT_OK, InputError, positive_int

NAME = "serve"
EXTRA = "mcp"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        NAME,
        help="run the reference MCP Streamable HTTP server (loopback only), optionally with faults",
        description="Serve the reference MCP server at http://HOST:PORT/mcp until interrupted. Each --fault "
        "breaks one behaviour that a probe diagnostic must find.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--profile", metavar="P", help="the revision to serve (default: the newest with sessions, 2025-11-25)"
    )
    parser.add_argument("--stateless", action="store_true", help="issue no session ids")
    parser.add_argument(
        "--conformance",
        action="store_true",
        help="serve the official conformance suite's tools, prompts and resources, and 2026-07-28 "
        "(stateless, by MCP-Protocol-Version) beside the 2025-11-25 sessions at the same URL",
    )
    parser.add_argument("--json-response", action="store_true", help="answer with JSON, not SSE")
    parser.add_argument(
        "--fault", action="append", default=[], metavar="NAME", help="switch a fault on (repeatable)"
    )
    parser.add_argument(
        "--keepalive", type=float, default=15.0, metavar="S", help="seconds between keep-alive comments"
    )
    parser.add_argument(
        "--store-size",
        type=positive_int,
        default=16,
        metavar="N",
        help="events each stream keeps for resumption (default 16); a reader the store outran is cut",
    )
    bounds = parser.add_argument_group(
        "bounds against hostile clients", "(defaults: ssewire.mcp.reference.server.ReferenceServer says why)"
    )
    bounds.add_argument(
        "--max-body", type=positive_int, metavar="BYTES", help="largest request body; past it 413 (1 MiB)"
    )
    bounds.add_argument(
        "--max-sessions",
        type=positive_int,
        metavar="N",
        help="sessions kept; the least recently used one not working makes room, 503 when all work (64)",
    )
    bounds.add_argument(
        "--session-idle-timeout",
        type=_positive_seconds,
        metavar="S",
        help="a session with no request and no open stream for S seconds is dropped (600)",
    )
    bounds.add_argument(
        "--max-store-bytes",
        type=positive_int,
        metavar="BYTES",
        help="events kept for resumption in all, finished streams dropped first (256 MiB)",
    )
    bounds.add_argument(
        "--max-tasks",
        type=positive_int,
        metavar="N",
        help="streaming tool calls running at once; past it 'server busy' (64)",
    )
    parser.add_argument("--list-faults", action="store_true", help="list the faults and exit")


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):  # NaN too
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text}")
    return value


BOUNDS = ("max_body", "max_sessions", "session_idle_timeout", "max_store_bytes", "max_tasks")


def run(args: argparse.Namespace) -> int:
    from ..mcp.reference.faults import FAULTS

    if args.list_faults:
        for fault in FAULTS.values():
            sys.stdout.write(f"{fault.value:28} -> {fault.diagnostic}: {fault.breaks}\n")
        return EXIT_OK
    if args.host not in LOOPBACK:
        raise InputError(f"the reference server binds loopback only, not {args.host!r}")
    from ..mcp.reference import ReferenceServer
    from ..mcp.server.serving import serve

    bounds = {name: getattr(args, name) for name in BOUNDS if getattr(args, name) is not None}
    try:
        app = ReferenceServer(
            **({"profile": args.profile} if args.profile else {}),
            **bounds,
            faults=args.fault,
            keepalive=args.keepalive,
            json_response=args.json_response,
            stateless=args.stateless,
            store_size=args.store_size,
            conformance=args.conformance,
        )
    except ValueError as invalid:  # options that do not go together (--conformance --stateless)
        raise InputError(str(invalid)) from None
    mode = ", conformance fixture" if args.conformance else ""
    print(
        f"ssewire serve: http://{args.host}:{args.port}{app.path} "
        f"(faults: {', '.join(sorted(app.faults)) or 'none'}{mode})",
        file=sys.stderr,
    )
    serve(app, host=args.host, port=args.port, log_level="warning")  # a head deadline, a connection cap
    return EXIT_OK
