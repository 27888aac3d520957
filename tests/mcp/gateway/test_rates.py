"""Rate limits through the gateway: two replicas on a real redis-server take from one bucket
per principal (and per principal and tool), an empty one is a 429 with ``Retry-After`` and
the JSON-RPC error, another principal is served meanwhile, and nothing refused goes upstream;
under 2026-07-28 the passthrough meters each request the same way."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator

import httpx
import pytest

from ssewire.mcp.gateway.stores.redis import RedisStore
from ssewire.mcp.server.rates import Rate, RateLimits
from tests.mcp.gateway.test_routes import recorded
from tests.mcp.gateway.test_security import echo, opened, ping
from tests.support.gateway_runs import gateway_over
from tests.support.redis_server import redis_server
from tests.support.resets import reference_server
from tests.support.tokens import as_principal, token_auth

RATES = [Rate.parse("3/minute"), Rate.parse("1/minute", tools=["big"])]


def big(ident: int) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": "big", "arguments": {"size": 4}},
    }


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


@contextlib.contextmanager
def replicas(upstream: str, redis_url: str, count: int = 2) -> Iterator[list[str]]:
    prefix = f"ssewire:test:{secrets.token_hex(4)}:"
    with contextlib.ExitStack() as stack:
        urls = []
        for _ in range(count):
            store = RedisStore.from_url(redis_url, prefix=prefix)
            gateway = gateway_over(
                upstream, auth=token_auth(), store=store, replica=True, rates=RateLimits(RATES, store)
            )
            urls.append(stack.enter_context(gateway).url)
        yield urls


def test_replicas_share_each_principals_buckets_and_refuse_past_them_with_429(redis_url):
    with recorded(reference_server()) as (upstream, seen), replicas(upstream, redis_url) as (one, two):
        with httpx.Client(timeout=10) as http:
            alice = opened(http, one, as_principal("alice"))
            bob = opened(http, two, as_principal("bob"))
            served = [http.post(url, json=ping(n), headers=alice) for n, url in enumerate([one, two, one])]
            assert [answer.status_code for answer in served] == [200, 200, 200]
            limited = http.post(two, json=echo(9), headers=alice)  # the fourth, at either replica
            assert limited.status_code == 429, limited.text
            assert 1 <= int(limited.headers["retry-after"]) <= 20  # a token every 20 s
            error = limited.json()["error"]
            assert limited.json()["id"] == 9 and "limited to 3/minute" in error["message"]
            assert http.post(one, json=big(10), headers=bob).status_code == 200  # bob's own buckets
            again = http.post(two, json=big(11), headers=bob)
            assert again.status_code == 429 and "calls of 'big'" in again.json()["error"]["message"]
            assert http.post(two, json=ping(12), headers=bob).status_code == 200  # other requests go on
            metrics = http.get(two.replace("/mcp", "/metrics"), headers=as_principal("alice")).text
    assert not any(record.calls("echo") for record in seen.seen)  # alice's refused call stayed here
    assert sum(record.calls("big") for record in seen.seen) == 1
    assert "ssewire_gateway_rate_limited_total 2" in metrics  # the replica's own refusals: both were two's


def test_the_2026_07_28_passthrough_meters_each_request():
    with recorded(reference_server(profile="2026-07-28")) as (upstream, seen):
        rates = RateLimits([Rate.parse("2/minute")])
        with (
            gateway_over(upstream, auth=token_auth(), rates=rates) as gateway,
            httpx.Client(timeout=10) as http,
        ):
            headers = {
                **as_principal("alice"),
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/call",
                "Mcp-Name": "echo",
            }
            meta = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            call = {**echo(1), "params": {**echo(1)["params"], "_meta": meta}}
            statuses = [
                http.post(gateway.url, json={**call, "id": n}, headers=headers).status_code for n in range(3)
            ]
    assert statuses == [200, 200, 429]
    assert sum(record.calls("echo") for record in seen.seen) == 2
