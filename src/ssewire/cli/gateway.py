"""``ssewire gateway``: relay MCP to upstream servers (one, or the routes of a config file),
healing their resets; drain on SIGTERM, read the routes file again on SIGHUP."""

from __future__ import annotations

import argparse
import errno
import importlib.util
import signal
import sys
from typing import Any, Literal

from ._common import EXIT_OK, InputError, header_options, non_negative_int, positive_int

NAME = "gateway"
EXTRA = "mcp"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
# exit codes besides 0 (served, and stopped: a drain included) and 2 (an input error)
EXIT_PORT, EXIT_STORE, EXIT_UPSTREAM = 3, 4, 5


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
    parser.add_argument("--upstream", metavar="URL", help="the upstream MCP endpoint, served at /mcp")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a TOML file of routes instead: [servers.NAME] tables, each served at /servers/NAME/mcp",
    )
    parser.add_argument(
        "--upstream-revision",
        metavar="REVISION",
        help="the one revision the upstream speaks (2025-11-25 or 2026-07-28): clients of the other "
        "are served through a revision bridge (default: none, every client relayed as it speaks)",
    )
    parser.add_argument(
        "--reissue",
        choices=("annotations", "off"),
        default="annotations",
        help="a tool call whose answer broke beyond resumption is sent again only if the upstream "
        "lists the tool as read-only, or idempotent and not destructive (annotations, the default), "
        "or never (off); a config file says it per route (reissue)",
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
        "(default http://HOST:PORT/mcp); with --config, the base each route's path goes under",
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
        type=non_negative_int,
        metavar="N",
        help="connections open at once from one address (default: a quarter of --max-connections; "
        "0: no share, behind a balancer, where every client has its address)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve /metrics on 127.0.0.1:PORT only (else on the main port, behind the same auth)",
    )
    parser.add_argument(
        "--drain",
        type=float,
        default=30.0,
        metavar="S",
        help="on SIGTERM: seconds to finish or hand over the calls in flight before exiting",
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds the store and each upstream have to answer at start-up, else exit 4 or 5 "
        "(0: start without waiting; /readyz says what does not answer)",
    )
    parser.add_argument(
        "--access-log",
        choices=("on", "off"),
        default="on",
        help="an access line for each relayed request (off: none; the other lines stay)",
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="stderr logs: lines of text, or JSON objects",
    )


def run(args: argparse.Namespace) -> int:
    from ..mcp.gateway.observe import configure_logging
    from ..mcp.gateway.routes import Router

    if (args.upstream is None) == (args.config is None):
        raise InputError("give --upstream URL or --config FILE (one of them)")
    deadlines = (args.timeout, args.body_timeout, args.head_timeout, args.write_timeout, args.drain)
    waits = (args.keepalive, args.start_timeout)
    if not all(0 <= seconds < float("inf") for seconds in waits) or not all(
        0 < seconds < float("inf") for seconds in deadlines
    ):
        raise InputError(
            "--keepalive and --start-timeout must be >= 0 and --timeout, --body-timeout, --head-timeout, "
            "--write-timeout, --drain > 0 seconds"
        )
    routes = _routes(args)
    apps = {route.name: _route_app(route, args) for route in routes}
    router = Router(apps, serve_metrics=args.metrics_port is None)
    configure_logging(args.log_format, access=args.access_log == "on")
    reloader = None
    if args.config is not None:  # SIGHUP reads the file again
        from ..mcp.gateway.config import load
        from ..mcp.gateway.reload import Reloader

        reloader = Reloader(
            router,
            routes,
            load=lambda: load(args.config),
            build=lambda route: _route_app(route, args),
            drain=args.drain,
        )
    return _serve(router, args, reloader)


def _routes(args: argparse.Namespace) -> list[Any]:
    """The routes: the config file's, or the one of ``--upstream`` (``default``, at /mcp)."""
    from ..mcp.gateway.config import Route, load
    from ..mcp.protocol.reissue import OFF, SAFE_TOOLS

    if args.config is None:
        if not args.upstream.startswith(("http://", "https://")):
            raise InputError("--upstream must be an http(s) URL")  # never echoed: it may hold a secret
        headers = header_options(args.upstream_header, args.upstream_header_env, "--upstream-header")
        reissue = OFF if args.reissue == "off" else SAFE_TOOLS
        return [
            Route("default", args.upstream, revision=args.upstream_revision, headers=headers, reissue=reissue)
        ]
    flags = {
        "--reissue": args.reissue != "annotations",
        "--upstream-revision": args.upstream_revision,
        "--upstream-header": args.upstream_header,
        "--upstream-header-env": args.upstream_header_env,
    }
    given = [flag for flag, value in flags.items() if value]
    if given:
        raise InputError(f"{given[0]}: give it per route in the config file (revision, headers_env, reissue)")
    return load(args.config)


def _route_app(route: Any, args: argparse.Namespace) -> Any:
    """One route's gateway (and its revision bridge, given a revision)."""
    from ..mcp.gateway import Gateway
    from ..mcp.server.quotas import Limits

    default = args.config is None
    path = "/mcp" if default else route.path
    base = f"http://{_url_host(args.host)}:{args.port}"
    # with routes, --public-url is the base their paths go under
    public = (args.public_url or f"{base}/mcp") if default else (args.public_url or base).rstrip("/") + path
    auth = _auth(args, public)
    if auth is None and args.host not in LOOPBACK and not args.insecure_no_auth:
        raise InputError(
            f"--host {args.host} is beyond loopback: give --auth-tokens or --auth-jwks "
            "(or --insecure-no-auth, to let anyone who reaches the port use the upstream)"
        )
    if route.principals is not None and auth is None:
        raise InputError(f"servers.{route.name}.principals: needs --auth-tokens or --auth-jwks")
    _rules_fit(route, auth)
    store, replica = _store(args.store, None if default else f"ssewire:gw:{route.name}:")
    size = route.max_message_size or args.max_message_size
    options = {} if size is None else {"max_message_size": size}
    limits = Limits(
        sessions=args.limit_sessions,
        calls=args.limit_calls,
        streams=args.limit_streams,
        bytes=args.limit_bytes,
    )
    shared = {  # what the gateway and a revision bridge beside it take alike
        "allowed_hosts": args.allow_host,
        "allowed_origins": args.allow_origin,
        "headers": route.headers or None,
        "auth": auth,
        "limits": route.limits_over(limits),
    }
    if route.rates:  # its buckets in the route's store: with Redis, one for every replica
        from ..mcp.server.rates import RateLimits

        shared["rates"] = RateLimits(route.rates, store)
    keepalive = args.keepalive if route.keepalive is None else route.keepalive
    timeout = route.timeout or args.timeout
    http = None
    if route.command is not None or route.members is not None:  # an upstream served in the process
        from ..mcp.gateway.local_route import local_client

        http = local_client(route, max_message_size=size, timeout=timeout, keepalive=keepalive)
        shared["http"] = http
    app: Any = Gateway(
        route.upstream,
        path=path,
        store=store,
        replica=replica,
        keepalive=keepalive,
        timeout=timeout,
        **shared,
        max_bytes_in_flight=args.max_bytes_in_flight,
        body_timeout=args.body_timeout,
        write_timeout=args.write_timeout,
        max_sessions=args.max_sessions,
        serve_metrics=False,
        serve_health=False,
        tools=route.tools,
        reissue=route.reissue,
        principals=route.principals,
        telemetry=_telemetry(route.name),
        **options,
    )
    if http is not None:
        from ..mcp.gateway.local_route import label

        app.upstream_label = label(route)
        app.hand_over = False  # its upstream is this process's: its calls finish here as it drains
    if route.revision is not None:  # the route's tool policy and principals on the bridge too
        app = _bridged(
            app,
            route.revision,
            {**shared, "tools": route.tools, "principals": route.principals, "reissue": route.reissue},
            path,
        )
    if http is not None:
        from ..mcp.gateway.local_route import LocalRoute

        app = LocalRoute(app, http)  # (a stdio server stops with the route)
    return app


def _rules_fit(route: Any, auth: Any) -> None:
    """A rule on principals needs them told apart; one on scopes or claims needs tokens
    that have them (JWTs): else it would fit no one, silently."""
    from ..mcp.server.auth import JwtAuth

    for n, rule in enumerate(route.tools.rules if route.tools is not None else ()):
        where = f"servers.{route.name}.rules[{n}]"
        if rule.conditional and auth is None:
            raise InputError(f"{where}: a rule on principals needs --auth-tokens or --auth-jwks")
        if (rule.scopes or rule.claims) and not isinstance(auth, JwtAuth):
            raise InputError(f"{where}: scopes and claims are a JWT's: they need --auth-jwks")


def _telemetry(route: str) -> Any:
    """The route's logs and traces: spans through the process's global OpenTelemetry
    provider when opentelemetry is installed (an exporter is the operator's to set up;
    without one, ``traceparent`` still goes through); session ids hashed with the key in
    ``SSEWIRE_GATEWAY_LOG_KEY`` when set, so every replica's logs name a session alike."""
    import os

    from ..mcp.gateway.observe import Telemetry

    provider = "global" if importlib.util.find_spec("opentelemetry") is not None else None
    key = os.environ.get("SSEWIRE_GATEWAY_LOG_KEY")
    return Telemetry(route, key=key.encode() if key else None, tracer_provider=provider)


def _bridged(gateway: Any, revision: str, shared: dict[str, Any], path: str) -> Any:
    """The gateway for clients of the upstream's revision, a bridge for the others."""
    from ..mcp.bridge import Bridge
    from ..mcp.gateway.bridged import Bridged
    from ..mcp.protocol.profiles import NEWEST, NEWEST_WITH_SESSIONS, resolve

    profile, _ = resolve(revision)  # an unknown name: an input error, exit 2
    if profile not in (NEWEST, NEWEST_WITH_SESSIONS):
        raise InputError(
            f"--upstream-revision: the bridge maps {NEWEST_WITH_SESSIONS.name} and {NEWEST.name} onto each other"
        )
    bridge = Bridge(
        gateway.upstream, upstream_revision=profile.name, path=path, trace=gateway.trace_request, **shared
    )
    return Bridged(gateway, bridge)


def _serve(router: Any, args: argparse.Namespace, reloader: Any = None) -> int:
    """Bind, check the stores and the upstreams, then serve (the metrics on a loopback port
    of their own when asked) until SIGTERM's drain ends; a failure at start-up is one line
    and its exit code."""
    import asyncio

    from ..mcp.server.serving import Draining, bind, config, run

    listeners = [(args.host, args.port), *([("127.0.0.1", args.metrics_port)] if args.metrics_port else [])]
    sockets = []
    for host, port in listeners:
        try:
            sockets.append(bind(host, port))
        except OSError as failed:
            for sock in sockets:
                sock.close()
            why = (
                "the port is in use" if failed.errno == errno.EADDRINUSE else (failed.strerror or str(failed))
            )
            print(f"ssewire gateway: cannot listen on {_url_host(host)}:{port}: {why}", file=sys.stderr)
            return EXIT_PORT
    options = {"head_timeout": args.head_timeout, "max_connections": args.max_connections}
    main = Draining(
        config(
            router,
            host=args.host,
            port=args.port,
            **options,
            max_connections_per_peer=_peer_share(args),
            log_level="warning",
        ),
        drain=router.drain,
        seconds=args.drain,
        cut=router.cut_streams,
        settle_heap=True,  # the process is the gateway's own
    )
    servers = [main]
    if args.metrics_port is not None:
        metrics = config(router.metrics_app(), host="127.0.0.1", port=args.metrics_port, log_level="warning")
        servers.append(Draining(metrics, signals=False))  # stopped with the main one

    async def serving() -> int:
        code = await _ready_to_start(router, args.start_timeout) if args.start_timeout else EXIT_OK
        if code != EXIT_OK:
            await router.aclose()
            return code
        gateways = router.gateways.values()
        replica = any(gateway.replica for gateway in gateways)
        routes = ", ".join(f"{gateway.path} -> {gateway.upstream_label}" for gateway in gateways)
        print(
            f"ssewire gateway: http://{_url_host(args.host)}:{args.port} {routes} "
            f"(store: {'redis' if replica else 'memory'}, auth: {_auth_name(args)}, drain: {args.drain:g} s)",
            file=sys.stderr,
        )
        if reloader is not None and hasattr(signal, "SIGHUP"):
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reloader.reload)
        running = [
            asyncio.ensure_future(server.serve(sockets=[sock]))
            for server, sock in zip(servers, sockets, strict=True)
        ]
        await running[0]
        for server in servers[1:]:
            server.should_exit = True
        await asyncio.gather(*running[1:])
        return EXIT_OK

    return run(serving())


async def _ready_to_start(router: Any, wait: float) -> int:
    """Every store answers a ping and every upstream answers at all, within ``wait``
    seconds; else one line saying which, and its exit code."""
    import asyncio
    import time

    deadline = time.monotonic() + wait
    gateways = router.gateways
    for gateway in {id(gateway.store): gateway for gateway in gateways.values()}.values():
        while not await gateway.store_answers():
            if time.monotonic() > deadline:
                print(f"ssewire gateway: the store does not answer (waited {wait:g} s)", file=sys.stderr)
                return EXIT_STORE
            await asyncio.sleep(0.25)
    for name, gateway in gateways.items():
        while not await gateway.upstream_answers():
            if time.monotonic() > deadline:
                route = "" if name == "default" else f"route {name}: "
                print(
                    f"ssewire gateway: {route}the upstream {gateway.upstream_label} does not answer "
                    f"(waited {wait:g} s)",
                    file=sys.stderr,
                )
                return EXIT_UPSTREAM
            await asyncio.sleep(0.25)
    return EXIT_OK


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


def _store(spec: str, prefix: str | None) -> tuple[Any, bool]:
    """The route's store: its own memory, or Redis under the route's key prefix (the
    command line's one upstream keeps the prefix replicas of earlier versions share)."""
    if spec == "memory":
        return None, False
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from ..mcp.gateway.stores.redis import RedisStore

        return RedisStore.from_url(spec, **({} if prefix is None else {"prefix": prefix})), True
    raise InputError("--store must be 'memory' or a redis:// URL")  # never echoed: a URL may hold a password


def _peer_share(args: argparse.Namespace) -> int | Literal["share"] | None:
    """--max-connections-per-peer as serving.config takes it: unset is the default share, 0 none."""
    share: int | None = args.max_connections_per_peer
    if share is None:
        return "share"
    return share or None
