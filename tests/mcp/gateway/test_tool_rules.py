"""Tool rules per principal on every path of a route: the gateway's sessions (a 2025-11-25
upstream), its 2026-07-28 passthrough, and the revision bridge (a 2026-07-28 client, a
2025-11-25 upstream). JWT principals told apart by name, scope and claim; a tool a principal
may not call is absent from its ``tools/list`` and refused before anything goes upstream."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ssewire.mcp.bridge import Bridge
from ssewire.mcp.client import Client, RPCError
from ssewire.mcp.gateway import Gateway
from ssewire.mcp.gateway.bridged import Bridged
from ssewire.mcp.server.tools import ToolPolicy, ToolRule
from ssewire.mcp.transport.serving import running
from tests.mcp.gateway.test_routes import recorded
from tests.support.resets import reference_server
from tests.support.tokens import jwt_auth as make_jwt_auth
from tests.support.tokens import rsa_key, sign, write_jwks

RULES = ToolPolicy(
    deny=["countdown"],  # for everyone, whatever the rules say
    rules=[
        ToolRule(ToolPolicy(allow=["ech?"]), claims={"team": ("search", "infra")}),
        ToolRule(ToolPolicy(deny=["big"]), scopes=frozenset({"tools:admin"})),
        ToolRule(ToolPolicy(allow=["*"]), principals=frozenset({"bob"})),
    ],
)
# the tools each principal is offered, of the reference server's
SEES = {
    "alice": lambda names: ["echo"],  # her team claim: the first rule
    "admin": lambda names: [n for n in names if n not in ("big", "countdown")],
    "bob": lambda names: [n for n in names if n != "countdown"],
    "carol": lambda names: [],  # no rule fits her: nothing
}
PATHS = ("sessions", "passthrough", "bridge")


@pytest.fixture(scope="module")
def key():
    return rsa_key()


@pytest.fixture(scope="module")
def tokens(key) -> dict[str, str]:
    return {
        "alice": sign(key, sub="alice", team=["web", "search"]),  # a list claim holding one value
        "admin": sign(key, sub="dana", scope="mcp tools:admin", team="web"),
        "bob": sign(key, sub="bob"),
        "carol": sign(key, sub="carol", team="web"),
    }


@contextlib.contextmanager
def route(path: str, jwks: Path) -> Iterator[tuple[str, Any, str]]:
    """The route on ``path``: its URL, the upstream's recording, the client's revision."""
    revision = "2026-07-28" if path == "passthrough" else "2025-11-25"
    with recorded(reference_server(profile=revision)) as (upstream, seen):
        shared = {"auth": make_jwt_auth(jwks), "tools": RULES}
        gateway = Gateway(upstream, keepalive=0.5, **shared)
        app: Any = gateway
        if path == "bridge":
            app = Bridged(gateway, Bridge(upstream, upstream_revision=revision, **shared))
        with running(app) as root:
            yield root + gateway.path, seen, "2025-11-25" if path == "sessions" else "2026-07-28"


async def offered(url: str, profile: str, token: str, call: str) -> tuple[list[str], dict[str, Any] | None]:
    """The tools listed to the holder of ``token``, and the error of calling ``call`` (None: served)."""
    async with Client(
        url, profile=profile, headers={"Authorization": f"Bearer {token}"}, timeout=20
    ) as client:
        listed = [tool["name"] for tool in await client.list_tools()]
        try:
            await client.call_tool(call, {"text": "x"} if call == "echo" else {"size": 4})
        except RPCError as refused:
            return listed, refused.error
        return listed, None


@pytest.mark.parametrize("path", PATHS)
def test_each_principal_sees_and_calls_only_the_tools_its_rule_offers(path, key, tokens, tmp_path):
    jwks = write_jwks(tmp_path / "jwks.json", key)
    with route(path, jwks) as (url, seen, profile):

        async def everyone() -> dict[str, tuple[list[str], Any]]:
            return {who: await offered(url, profile, tokens[who], "big") for who in SEES}

        outcomes = asyncio.run(asyncio.wait_for(everyone(), 60))
        every = outcomes["bob"][0] + ["countdown"]  # bob sees all but the route's own denial
        for who, sees in SEES.items():
            listed, error = outcomes[who]
            assert listed == sees(every), who
            if "big" in listed:
                assert error is None, who
            else:
                assert error is not None and error["data"] == {"gateway": "tool-refused", "tool": "big"}, who
        calls = [record for record in seen.seen if record.calls("big")]
        assert len(calls) == 1  # bob's alone: every refused call stayed in the gateway
        assert {"big", "echo"} <= set(every)


def test_the_route_wide_denial_holds_whatever_rule_fits(key, tokens, tmp_path):
    jwks = write_jwks(tmp_path / "jwks.json", key)
    with route("sessions", jwks) as (url, seen, profile):
        _, error = asyncio.run(asyncio.wait_for(offered(url, profile, tokens["bob"], "countdown"), 30))
    assert error is not None and error["data"]["tool"] == "countdown"
    assert not any(record.calls("countdown") for record in seen.seen)
