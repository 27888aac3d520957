"""``ssewire serve``: the reference MCP server, optionally with faults, on 127.0.0.1."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import EXIT_OK, InputError

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
    parser.add_argument("--json-response", action="store_true", help="answer with JSON, not SSE")
    parser.add_argument(
        "--fault", action="append", default=[], metavar="NAME", help="switch a fault on (repeatable)"
    )
    parser.add_argument(
        "--keepalive", type=float, default=15.0, metavar="S", help="seconds between keep-alive comments"
    )
    parser.add_argument(
        "--store-size",
        type=int,
        default=16,
        metavar="N",
        help="events each stream keeps for resumption (default 16); a reader the store outran is cut",
    )
    parser.add_argument("--list-faults", action="store_true", help="list the faults and exit")


def run(args: argparse.Namespace) -> int:
    from ..mcp.live.faults import FAULTS

    if args.list_faults:
        for fault in FAULTS.values():
            sys.stdout.write(f"{fault.value:28} -> {fault.diagnostic}: {fault.breaks}\n")
        return EXIT_OK
    if args.host not in LOOPBACK:
        raise InputError(f"the reference server binds loopback only, not {args.host!r}")
    import uvicorn

    from ..mcp.live.server import ReferenceServer

    app = ReferenceServer(
        **({"profile": args.profile} if args.profile else {}),
        faults=args.fault,
        keepalive=args.keepalive,
        json_response=args.json_response,
        stateless=args.stateless,
        store_size=args.store_size,
    )
    print(
        f"ssewire serve: http://{args.host}:{args.port}{app.path} (faults: {', '.join(sorted(app.faults)) or 'none'})",
        file=sys.stderr,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return EXIT_OK
