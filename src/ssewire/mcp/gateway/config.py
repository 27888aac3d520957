"""The routes file of ``ssewire gateway --config``: which upstreams the process relays.

    [servers.search]                      # served at /servers/search/mcp
    upstream = "http://127.0.0.1:9001/mcp"  # or upstream_env = "SEARCH_URL"
    headers_env = ["SEARCH_AUTH"]          # each variable holds 'Name: value'
    principals = ["alice"]
    tools = { allow = ["echo"] }           # or { deny = [...] }; names or patterns (search_*)
    reissue = { tools = ["echo"], never = ["wipe"] }  # or "off"; annotations = false
    [servers.search.limits]
    calls = 16

    [[servers.search.rules]]              # who sees which tools: the first rule that fits
    principals = ["alice"]                 # and/or scopes = [...], claims = { team = ["a", "b"] }
    allow = ["*"]                          # or deny = [...]

    [[servers.search.rates]]              # each principal's requests (429 with Retry-After)
    rate = "100/minute"                    # COUNT/second, minute or hour; burst = COUNT by default
    [[servers.search.rates]]
    tools = ["search_*"]                   # each principal's calls of each of these tools
    rate = "5/second"
    burst = 10

    [servers.files]                       # a stdio server, started and served over HTTP
    command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"]
    env = ["FILES_TOKEN"]                  # what it gets of the gateway's environment

Read with the standard library's ``tomllib`` and checked whole before anything starts: an
error names its key (``servers.search.timeout: a number of seconds > 0``) and never echoes
a value that may be a secret (an upstream URL, an environment variable's content). The file
says what is relayed; how the process runs (address, store, authentication, drain) is the
command line's.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._errors import InputError
from ..._http import header_field
from ..protocol.profiles import NEWEST, NEWEST_WITH_SESSIONS
from ..protocol.reissue import OFF, SAFE_TOOLS, ReissuePolicy
from ..protocol.wire import caller_headers
from ..server.quotas import Limits
from ..server.rates import Rate
from ..server.tools import ToolPolicy, ToolRule
from ..virtual.names import Names, NamesRefused

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
ROUTE_KEYS = frozenset(
    {
        "upstream",
        "upstream_env",
        "command",
        "env",
        "cwd",
        "revision",
        "headers_env",
        "timeout",
        "keepalive",
        "max_message_size",
        "principals",
        "tools",
        "rules",
        "rates",
        "reissue",
        "limits",
    }
)
LIMIT_KEYS = ("sessions", "calls", "streams", "bytes")
STDIO_URL = "http://stdio.invalid/mcp"  # what a stdio route's upstream engine asks (its transport answers)
VIRTUAL_URL = "http://virtual.invalid/mcp"  # and a virtual server's
# a virtual server's own keys (its members are tables of the upstream keys and a prefix)
VIRTUAL_KEYS = frozenset(
    {"members", "separator", "max_name_length", "timeout", "keepalive", "max_message_size"}
    | {"principals", "tools", "rules", "rates", "limits"}
)
MEMBER_KEYS = frozenset(
    {"upstream", "upstream_env", "command", "env", "cwd", "headers_env", "revision", "timeout"}
    | {"max_message_size", "tools", "reissue", "prefix"}
)


@dataclass
class Route:
    """One upstream and how it is relayed, as the file says."""

    name: str
    upstream: str
    revision: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    keepalive: float | None = None
    max_message_size: int | None = None
    principals: list[str] | None = None
    tools: ToolPolicy | None = None
    reissue: ReissuePolicy | None = SAFE_TOOLS
    limits: dict[str, int] = field(default_factory=dict)
    command: list[str] | None = None  # a stdio server instead of an HTTP upstream
    env: list[str] = field(default_factory=list)
    cwd: str | None = None
    rates: list[Rate] = field(default_factory=list)
    source: str = ""  # what its table says (canonical JSON): a reload keeps a route whose source is unchanged
    members: list[Route] | None = None  # a virtual server's upstreams (each a route of its own table)
    prefix: str = ""  # a member's: what its names are shown under (its name by default)
    separator: str = "__"
    max_name_length: int = 64

    @property
    def path(self) -> str:
        return f"/servers/{self.name}/mcp"

    def limits_over(self, defaults: Limits) -> Limits:
        """The route's limits: its own where the file gives them, else ``defaults``."""
        return Limits(**{key: self.limits.get(key, getattr(defaults, key)) for key in LIMIT_KEYS})


def load(path: str | Path, environ: Mapping[str, str] | None = None) -> list[Route]:
    """The routes of the file at ``path``, checked; `InputError` naming the key otherwise."""
    environ = os.environ if environ is None else environ
    try:
        with open(path, "rb") as file:
            raw = tomllib.load(file)
    except OSError as failed:
        raise InputError(
            f"--config: cannot read the file ({failed.strerror or type(failed).__name__})"
        ) from None
    except tomllib.TOMLDecodeError as failed:
        raise InputError(f"--config: not TOML ({failed})") from None
    unknown = sorted(set(raw) - {"servers"})
    if unknown:
        raise InputError(f"{unknown[0]}: unknown key (the file holds [servers.<name>] tables)")
    servers = raw.get("servers")
    if not isinstance(servers, dict) or not servers:
        raise InputError("servers: give at least one [servers.<name>] table")
    return [
        _virtual(name, table, environ)
        if isinstance(table, dict) and "members" in table
        else _route(name, table, environ)
        for name, table in servers.items()
    ]


def _virtual(name: str, table: dict[str, Any], environ: Mapping[str, str]) -> Route:
    """A virtual server: its members (upstream tables, each with a prefix) merged into one,
    served as 2025-11-25 (2026-07-28 clients through the bridge), with the route's own
    principals, tool rules (on the shown names), rates and limits."""
    where = f"servers.{name}"
    unknown = sorted(set(table) - VIRTUAL_KEYS)
    if unknown:
        raise InputError(f"{where}.{unknown[0]}: unknown key (a virtual server's upstreams are its members)")
    members = table["members"]
    if not isinstance(members, dict) or not members:
        raise InputError(f"{where}.members: [{where}.members.<name>] tables, at least one")
    own = {
        key: value for key, value in table.items() if key not in ("members", "separator", "max_name_length")
    }
    route = _route(name, {**own, "upstream": VIRTUAL_URL}, environ)
    route.upstream, route.revision = VIRTUAL_URL, NEWEST_WITH_SESSIONS.name
    route.source = json.dumps(table, sort_keys=True, default=str)
    route.separator = _text(table, where, "separator") or "__"
    route.max_name_length = _count(table, where, "max_name_length") or 64
    route.members = []
    for member, inner in members.items():
        at = f"{where}.members.{member}"
        if not isinstance(inner, dict):
            raise InputError(f"{at}: a table")
        unknown = sorted(set(inner) - MEMBER_KEYS)
        if unknown:
            raise InputError(f"{at}.{unknown[0]}: unknown key")
        part = _route(
            member, {key: value for key, value in inner.items() if key != "prefix"}, environ, where=at
        )
        prefix = inner.get("prefix", member)
        if not isinstance(prefix, str):
            raise InputError(f'{at}.prefix: a string ("": its names as they are)')
        part.prefix = prefix
        route.members.append(part)
    try:
        Names(
            {m.name: m.prefix for m in route.members},
            separator=route.separator,
            max_length=route.max_name_length,
        )
    except NamesRefused as why:  # named by the key the file says it with
        key = {"separator": "separator", "max_length": "max_name_length"}.get(why.key)
        at = (
            f"{where}.{key}"
            if key
            else (f"{where}.members.{why.member}.prefix" if why.member else f"{where}.members")
        )
        raise InputError(f"{at}: {why}") from None
    return route


def _route(name: str, table: Any, environ: Mapping[str, str], *, where: str = "") -> Route:
    """A route, or (``where`` given) a virtual server's member, from its table."""
    kind = "a member" if where else "a route"
    where = where or f"servers.{name}"
    if not NAME.fullmatch(name):
        raise InputError(f"{where}: {kind} name is lower-case letters, digits, '-' and '_' (at most 63)")
    if not isinstance(table, dict):
        raise InputError(f"{where}: a table")
    unknown = sorted(set(table) - ROUTE_KEYS)
    if unknown:
        raise InputError(f"{where}.{unknown[0]}: unknown key")
    route = Route(name, _upstream(where, table, environ))
    route.source = json.dumps(table, sort_keys=True, default=str)
    route.revision = _revision(table, where)
    route.headers = _headers(where, table, environ)
    if "command" in table:
        _stdio(route, where, table, environ)
    elif "env" in table or "cwd" in table:
        raise InputError(f"{where}: env and cwd are a stdio server's (give command)")
    route.timeout = _seconds(table, where, "timeout")
    route.keepalive = _seconds(table, where, "keepalive", zero=True)
    route.max_message_size = _count(table, where, "max_message_size")
    route.principals = _names(table, where, "principals")
    route.tools = _tools(where, table)
    route.reissue = _reissue(where, table)
    route.rates = _rates(where, table.get("rates"))
    limits = table.get("limits", {})
    if not isinstance(limits, dict):
        raise InputError(f"{where}.limits: a table of {', '.join(LIMIT_KEYS)}")
    for key in limits:
        if key not in LIMIT_KEYS:
            raise InputError(f"{where}.limits.{key}: unknown key (one of {', '.join(LIMIT_KEYS)})")
        route.limits[key] = _count(limits, f"{where}.limits", key)  # type: ignore[assignment]
    return route


def _revision(table: dict[str, Any], where: str) -> str | None:
    """The one revision the upstream speaks: one the revision bridge maps onto the other."""
    name = _text(table, where, "revision")
    bridged = (NEWEST_WITH_SESSIONS.name, NEWEST.name)
    if name is not None and name not in bridged:
        raise InputError(f"{where}.revision: one of {', '.join(bridged)} (the revisions the bridge maps)")
    return name


def _stdio(route: Route, where: str, table: dict[str, Any], environ: Mapping[str, str]) -> None:
    """A stdio server's keys: its command, the variables it gets, where it runs. It is
    served as a 2025-11-25 server, so 2026-07-28 clients reach it through the bridge."""
    route.command = _names(table, where, "command")
    if not route.command:
        raise InputError(f"{where}.command: a list of strings, the program first")
    route.env = _names(table, where, "env") or []
    missing = [name for name in route.env if name not in environ]
    if missing:
        raise InputError(f"{where}.env: the environment variable {missing[0]} is not set")
    route.cwd = _text(table, where, "cwd")
    if route.headers:
        raise InputError(f"{where}.headers_env: a stdio server takes no headers (give it env)")
    if route.revision not in (None, NEWEST_WITH_SESSIONS.name):
        raise InputError(f"{where}.revision: a stdio server is served as {NEWEST_WITH_SESSIONS.name}")
    route.revision = NEWEST_WITH_SESSIONS.name


def _upstream(where: str, table: dict[str, Any], environ: Mapping[str, str]) -> str:
    if sum(key in table for key in ("upstream", "upstream_env", "command")) != 1:
        raise InputError(f"{where}: give upstream, upstream_env or command (one of them)")
    if "command" in table:
        return STDIO_URL
    if "upstream" in table:
        url, key = table["upstream"], f"{where}.upstream"
    else:
        variable = _text(table, where, "upstream_env")
        key = f"{where}.upstream_env"
        url = environ.get(variable or "")
        if url is None:
            raise InputError(f"{key}: the environment variable {variable} is not set")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise InputError(f"{key}: an http(s) URL")  # never echoed: it may hold a secret
    return url


def _headers(where: str, table: dict[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    fields: list[tuple[str, str]] = []
    for variable in _names(table, where, "headers_env") or []:
        value = environ.get(variable)
        if value is None:
            raise InputError(f"{where}.headers_env: the environment variable {variable} is not set")
        try:
            fields.append(header_field(value))
        except ValueError as why:
            raise InputError(f"{where}.headers_env: {variable}: {why}") from None
    try:
        return caller_headers(fields)  # pairs: a name given twice is refused there
    except ValueError as why:
        raise InputError(f"{where}.headers_env: {why}") from None


def _tools(where: str, table: dict[str, Any]) -> ToolPolicy | None:
    """The route's ``tools`` (for everyone) and its ``rules`` (per principal), as one policy."""
    tools, rules = table.get("tools"), table.get("rules")
    if tools is None and rules is None:
        return None
    if tools is not None and (
        not isinstance(tools, dict) or set(tools) - {"allow", "deny"} or len(tools) != 1
    ):
        raise InputError(f"{where}.tools: {{ allow = [...] }} or {{ deny = [...] }}, one of them")
    if rules is not None and (not isinstance(rules, list) or not rules):
        raise InputError(f"{where}.rules: [[{where}.rules]] tables, at least one")
    allow = _names(tools, f"{where}.tools", "allow") if tools else None
    deny = _names(tools, f"{where}.tools", "deny") if tools else None
    listed = [_rule(f"{where}.rules[{n}]", rule) for n, rule in enumerate(rules or [])]
    return ToolPolicy(allow=allow, deny=deny, rules=listed)


def _rule(where: str, table: Any) -> ToolRule:
    """One rule: whom it fits (principals, scopes, claims; none: everyone) and what it offers."""
    if not isinstance(table, dict):
        raise InputError(f"{where}: a table")
    unknown = sorted(set(table) - {"principals", "scopes", "claims", "allow", "deny"})
    if unknown:
        raise InputError(f"{where}.{unknown[0]}: unknown key")
    if ("allow" in table) == ("deny" in table):
        raise InputError(f"{where}: allow = [...] or deny = [...], one of them")
    names = _names(table, where, "allow" if "allow" in table else "deny") or []
    tools = ToolPolicy(allow=names) if "allow" in table else ToolPolicy(deny=names)
    principals = _names(table, where, "principals")
    claims = table.get("claims", {})
    if not isinstance(claims, dict):
        raise InputError(f"{where}.claims: a table of claim = value (or a list of values)")
    wanted: dict[str, tuple[Any, ...]] = {}
    for name, value in claims.items():
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(item, (str, int, bool)) for item in values):
            raise InputError(f"{where}.claims.{name}: a string, a number, true or false, or a list of them")
        wanted[name] = tuple(values)
    return ToolRule(
        tools,
        principals=frozenset(principals) if principals is not None else None,
        scopes=frozenset(_names(table, where, "scopes") or ()),
        claims=wanted,
    )


def _rates(where: str, rates: Any) -> list[Rate]:
    """The route's rate limits: ``[[servers.NAME.rates]]`` tables of rate, burst and tools."""
    if rates is None:
        return []
    if not isinstance(rates, list) or not rates:
        raise InputError(f"{where}.rates: [[{where}.rates]] tables, at least one")
    parsed = []
    for n, table in enumerate(rates):
        at = f"{where}.rates[{n}]"
        if not isinstance(table, dict):
            raise InputError(f"{at}: a table")
        unknown = sorted(set(table) - {"rate", "burst", "tools"})
        if unknown:
            raise InputError(f"{at}.{unknown[0]}: unknown key")
        text = _text(table, at, "rate")
        if text is None:
            raise InputError(f"{at}.rate: give it (10/second, 600/minute...)")
        tools = _names(table, at, "tools")
        if tools is not None and not tools:
            raise InputError(f"{at}.tools: at least one name (or leave tools out: every request)")
        burst = _count(table, at, "burst")  # (its own key in its error)
        try:
            parsed.append(Rate.parse(text, burst=burst, tools=tools))
        except ValueError as why:
            raise InputError(f"{at}.rate: {why}") from None
    return parsed


def _reissue(where: str, table: dict[str, Any]) -> ReissuePolicy:
    """Which tool calls are sent again when their answer broke: "off" (none), or a table
    of ``annotations`` (true by default), ``tools`` and ``never``."""
    value = table.get("reissue", {})
    if value == "off":
        return OFF
    keys = {"annotations", "tools", "never"}
    if not isinstance(value, dict) or set(value) - keys:
        raise InputError(f'{where}.reissue: "off", or a table of annotations, tools and never')
    annotations = value.get("annotations", True)
    if not isinstance(annotations, bool):
        raise InputError(f"{where}.reissue.annotations: true or false")
    tools = _names(value, f"{where}.reissue", "tools") or []
    never = _names(value, f"{where}.reissue", "never") or []
    return ReissuePolicy.of(annotations=annotations, tools=tools, never=never)


def _text(table: dict[str, Any], where: str, key: str) -> str | None:
    value = table.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise InputError(f"{where}.{key}: a string, not empty")
    return value


def _names(table: dict[str, Any], where: str, key: str) -> list[str] | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise InputError(f"{where}.{key}: a list of strings")
    return list(value)


def _seconds(table: dict[str, Any], where: str, key: str, *, zero: bool = False) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{where}.{key}: a number of seconds")
    if value < 0 or (value == 0 and not zero):
        raise InputError(f"{where}.{key}: a number of seconds {'>= 0' if zero else '> 0'}")
    return float(value)


def _count(table: dict[str, Any], where: str, key: str) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(f"{where}.{key}: a whole number > 0")
    return value
