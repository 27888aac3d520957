"""``ssewire gateway``: relay MCP to one upstream server, healing its resets."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import EXIT_OK, InputError, positive_int

NAME = "gateway"
EXTRA = "mcp"


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        NAME,
        help="relay MCP Streamable HTTP to an upstream server, healing its resets",
        description="Serve an MCP gateway at http://HOST:PORT/mcp (metrics at /metrics) until interrupted. "
        "Upstream streams are read through the resumption guard and resumed upstream; downstream "
        "clients resume from the gateway's own store.",
    )
    parser.add_argument("--upstream", required=True, metavar="URL", help="the upstream MCP endpoint")
    parser.add_argument("--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument(
        "--store",
        default="memory",
        metavar="memory|redis://...",
        help="where sessions and streams are kept: this process (default), or Redis shared by replicas",
    )
    parser.add_argument(
        "--max-message-size",
        type=positive_int,
        metavar="BYTES",
        help="largest message either way; past it that one call gets an explicit error (16 MiB)",
    )
    parser.add_argument(
        "--keepalive",
        type=float,
        default=15.0,
        metavar="S",
        help="seconds of silence before a keep-alive comment",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, metavar="S", help="deadline of one relayed call (300)"
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name accepted besides loopback",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an Origin accepted besides loopback",
    )


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from ..mcp.gateway import Gateway

    if not args.upstream.startswith(("http://", "https://")):
        raise InputError(f"--upstream must be an http(s) URL, not {args.upstream!r}")
    if args.keepalive < 0 or not args.timeout > 0:
        raise InputError("--keepalive must be >= 0 and --timeout > 0 seconds")
    store, replica = _store(args.store)
    options = {} if args.max_message_size is None else {"max_message_size": args.max_message_size}
    app = Gateway(
        args.upstream,
        store=store,
        replica=replica,
        keepalive=args.keepalive,
        timeout=args.timeout,
        allowed_hosts=args.allow_host,
        allowed_origins=args.allow_origin,
        **options,
    )
    print(
        f"ssewire gateway: http://{args.host}:{args.port}{app.path} -> {args.upstream} (store: {args.store})",
        file=sys.stderr,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return EXIT_OK


def _store(spec: str) -> tuple[Any, bool]:
    if spec == "memory":
        return None, False
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from ..mcp.gateway.stores.redis import RedisStore

        return RedisStore.from_url(spec), True
    raise InputError(f"--store must be 'memory' or a redis:// URL, not {spec!r}")
