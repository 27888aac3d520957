"""``ssewire gateway``: relay MCP to one upstream server, healing its resets."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Any

from ._common import EXIT_OK, InputError, header_options, positive_int

NAME = "gateway"
EXTRA = "mcp"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class _DefaultsShown(argparse.HelpFormatter):
    """Each option's help names its default, where it has one worth naming."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, [], False, argparse.SUPPRESS) or "%(default)" in text:
            return text
        return f"{text} (default: %(default)s)"


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        NAME,
        help="relay MCP Streamable HTTP to an upstream server, healing its resets",
        description="Serve an MCP gateway at http://HOST:PORT/mcp (metrics at /metrics) until interrupted. "
        "Upstream streams are read through the resumption guard and resumed upstream; downstream "
        "clients resume from the gateway's own store. Bound beyond loopback it authenticates every "
        "client (--auth-tokens or --auth-jwks) and binds each session to the one who opened it. "
        "'ssewire gateway hash-token PRINCIPAL' (or 'ssewire hash-token') makes a --auth-tokens line.",
        formatter_class=_DefaultsShown,
    )
    parser.add_argument("--upstream", required=True, metavar="URL", help="the upstream MCP endpoint")
    parser.add_argument(
        "--upstream-revision",
        metavar="REVISION",
        help="the one revision the upstream speaks (2025-11-25 or 2026-07-28): clients of the other "
        "are served through a revision bridge (default: none, every client relayed as it speaks)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="the address to bind")
    parser.add_argument("--port", type=int, default=8080, help="the port to bind")
    parser.add_argument(
        "--store",
        default="memory",
        metavar="memory|redis://...",
        help="where sessions and streams are kept: this process, or Redis shared by replicas",
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
        "--timeout", type=float, default=300.0, metavar="S", help="deadline of one relayed call"
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
    upstream = parser.add_argument_group(
        "upstream credentials (the operator's; a client's token never goes up)"
    )
    upstream.add_argument(
        "--upstream-header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="send this header with every upstream request (repeatable)",
    )
    upstream.add_argument(
        "--upstream-header-env",
        action="append",
        default=[],
        metavar="VAR",
        help="send the header held by environment variable VAR as 'NAME: VALUE' (repeatable): "
        "the secret stays out of the command line",
    )
    auth = parser.add_argument_group("downstream authentication (the MCP authorization spec)")
    auth.add_argument(
        "--auth-tokens",
        metavar="FILE",
        help="static bearer tokens: lines 'principal:<sha256 hex>' (make one with 'ssewire hash-token')",
    )
    auth.add_argument(
        "--auth-jwks", metavar="FILE|URL", help="OAuth 2.1 resource server: the JWKS of the issuer"
    )
    auth.add_argument("--auth-issuer", metavar="ISS", help="the JWTs' required iss")
    auth.add_argument("--auth-audience", metavar="AUD", help="the JWTs' required aud (this gateway)")
    auth.add_argument(
        "--auth-server",
        action="append",
        default=[],
        metavar="URL",
        help="an authorization server named in the protected resource metadata (repeatable; default the issuer)",
    )
    auth.add_argument(
        "--auth-scope",
        action="append",
        default=[],
        metavar="S",
        help="a scope every token must carry (repeatable)",
    )
    auth.add_argument(
        "--public-url",
        metavar="URL",
        help="the URL clients use for this gateway's MCP endpoint: the resource of the metadata "
        "(default http://HOST:PORT/mcp)",
    )
    auth.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve unauthenticated clients beyond loopback (anyone who reaches the port uses the upstream)",
    )
    limits = parser.add_argument_group("limits (what one client may hold; what the process holds)")
    limits.add_argument(
        "--limit-sessions", type=positive_int, default=256, metavar="N", help="sessions per client"
    )
    limits.add_argument(
        "--limit-calls", type=positive_int, default=256, metavar="N", help="calls in flight per client"
    )
    limits.add_argument(
        "--limit-streams", type=positive_int, default=64, metavar="N", help="GET streams open per client"
    )
    limits.add_argument(
        "--limit-bytes", type=positive_int, default=64 << 20, metavar="BYTES", help="request bytes per client"
    )
    limits.add_argument(
        "--max-bytes-in-flight",
        type=positive_int,
        default=256 << 20,
        metavar="BYTES",
        help="request bodies being read and parsed over all clients; past it 503",
    )
    limits.add_argument(
        "--body-timeout", type=float, default=30.0, metavar="S", help="seconds a request body may take"
    )
    limits.add_argument(
        "--head-timeout", type=float, default=10.0, metavar="S", help="seconds a request's head may take"
    )
    limits.add_argument(
        "--write-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds a write may wait for a client that does not read; then its stream is cut (it may resume)",
    )
    limits.add_argument(
        "--max-sessions",
        type=positive_int,
        default=1024,
        metavar="N",
        help="sessions relayed at once, all clients",
    )
    limits.add_argument(
        "--max-connections", type=positive_int, default=1000, metavar="N", help="connections open at once"
    )
    limits.add_argument(
        "--max-connections-per-peer",
        type=positive_int,
        metavar="N",
        help="connections open at once from one address (set it when clients connect directly; "
        "behind a balancer every client has its address)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve /metrics on 127.0.0.1:PORT only (else on the main port, behind the same auth)",
    )


def run(args: argparse.Namespace) -> int:
    from ..mcp.gateway import Gateway
    from ..mcp.server.quotas import Limits

    if not args.upstream.startswith(("http://", "https://")):
        raise InputError("--upstream must be an http(s) URL")  # never echoed: it may hold a secret
    deadlines = (args.timeout, args.body_timeout, args.head_timeout, args.write_timeout)
    if args.keepalive < 0 or not all(0 < seconds < float("inf") for seconds in deadlines):
        raise InputError(
            "--keepalive must be >= 0 and --timeout, --body-timeout, --head-timeout, --write-timeout > 0 seconds"
        )
    public = args.public_url or f"http://{_url_host(args.host)}:{args.port}/mcp"
    auth = _auth(args, public)
    if auth is None and args.host not in LOOPBACK and not args.insecure_no_auth:
        raise InputError(
            f"--host {args.host} is beyond loopback: give --auth-tokens or --auth-jwks "
            "(or --insecure-no-auth, to let anyone who reaches the port use the upstream)"
        )
    store, replica = _store(args.store)
    options = {} if args.max_message_size is None else {"max_message_size": args.max_message_size}
    shared = {  # what the gateway and a revision bridge beside it take alike
        "allowed_hosts": args.allow_host,
        "allowed_origins": args.allow_origin,
        "headers": header_options(args.upstream_header, args.upstream_header_env, "--upstream-header")
        or None,
        "auth": auth,
        "limits": Limits(
            sessions=args.limit_sessions,
            calls=args.limit_calls,
            streams=args.limit_streams,
            bytes=args.limit_bytes,
        ),
    }
    app = Gateway(
        args.upstream,
        store=store,
        replica=replica,
        keepalive=args.keepalive,
        timeout=args.timeout,
        **shared,
        max_bytes_in_flight=args.max_bytes_in_flight,
        body_timeout=args.body_timeout,
        write_timeout=args.write_timeout,
        max_sessions=args.max_sessions,
        serve_metrics=args.metrics_port is None,
        **options,
    )
    if args.upstream_revision is not None:
        app = _bridged(app, args, shared)
    print(
        f"ssewire gateway: http://{_url_host(args.host)}:{args.port}{app.path} -> {app.upstream_label} "
        f"(store: {'redis' if replica else 'memory'}, auth: {_auth_name(args)})",
        file=sys.stderr,
    )
    _serve(app, args)
    return EXIT_OK


def _bridged(gateway: Any, args: argparse.Namespace, shared: dict[str, Any]) -> Any:
    """The gateway for clients of the upstream's revision, a bridge for the others."""
    from ..mcp.bridge import Bridge
    from ..mcp.gateway.bridged import Bridged
    from ..mcp.protocol.profiles import NEWEST, NEWEST_WITH_SESSIONS, resolve

    profile, _ = resolve(args.upstream_revision)  # an unknown name: an input error, exit 2
    if profile not in (NEWEST, NEWEST_WITH_SESSIONS):
        raise InputError(
            f"--upstream-revision: the bridge maps {NEWEST_WITH_SESSIONS.name} and {NEWEST.name} onto each other"
        )
    return Bridged(gateway, Bridge(args.upstream, upstream_revision=profile.name, **shared))


def _serve(app: Any, args: argparse.Namespace) -> None:
    """The gateway, and its metrics on a loopback port of their own when asked, in one loop."""
    import asyncio

    import uvicorn

    from ..mcp.server.serving import config

    servers = [
        uvicorn.Server(
            config(
                app,
                host=args.host,
                port=args.port,
                head_timeout=args.head_timeout,
                max_connections=args.max_connections,
                max_connections_per_peer=args.max_connections_per_peer,
                log_level="warning",
            )
        )
    ]
    if args.metrics_port is not None:
        servers.append(
            uvicorn.Server(
                config(app.metrics_app(), host="127.0.0.1", port=args.metrics_port, log_level="warning")
            )
        )

    async def serving() -> None:
        await asyncio.gather(*(server.serve() for server in servers))

    asyncio.run(serving())


def _auth(args: argparse.Namespace, public: str) -> Any:
    jwt = [args.auth_jwks, args.auth_issuer, args.auth_audience]
    if args.auth_tokens and any(jwt):
        raise InputError("give --auth-tokens or --auth-jwks, not both")
    if args.auth_tokens:
        from ..mcp.server.auth import TokenAuth

        try:
            return TokenAuth.from_file(args.auth_tokens)
        except (OSError, ValueError) as exc:
            raise InputError(f"--auth-tokens: {exc}") from None
    if any(jwt):
        if not all(jwt):
            raise InputError("--auth-jwks needs --auth-issuer and --auth-audience (and the other way round)")
        from ..mcp.server.auth import JwtAuth

        if importlib.util.find_spec("jwt") is None:
            raise InputError("--auth-jwks needs PyJWT, which is not installed: pip install '.[auth]'")
        return JwtAuth(
            jwks=args.auth_jwks,
            issuer=args.auth_issuer,
            audience=args.auth_audience,
            resource=public,
            authorization_servers=args.auth_server or [args.auth_issuer],
            scopes=args.auth_scope,
        )
    return None


def _auth_name(args: argparse.Namespace) -> str:
    if args.auth_tokens:
        return "tokens"
    return "jwt" if args.auth_jwks else "off"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _store(spec: str) -> tuple[Any, bool]:
    if spec == "memory":
        return None, False
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from ..mcp.gateway.stores.redis import RedisStore

        return RedisStore.from_url(spec), True
    raise InputError("--store must be 'memory' or a redis:// URL")  # never echoed: a URL may hold a password
