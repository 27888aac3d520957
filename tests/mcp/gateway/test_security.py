"""The gateway exposed: every request authenticated (static tokens, JWTs against a JWKS of
the test's own key), RFC 6750 challenges and RFC 9728 metadata, each session bound to the
principal that opened it (in one process and across replicas on a real redis-server),
/metrics behind the same auth or on an app of its own, per-principal quotas, no client
token upstream, upstream refusals and secrets in upstream URLs, junk cursors, and the
command's refusal to bind beyond loopback unauthenticated."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import orjson
import pytest

from ssewire import Decoder
from ssewire.mcp.gateway import Gateway
from ssewire.mcp.gateway.stores.redis import RedisStore
from ssewire.mcp.server.quotas import Limits
from ssewire.mcp.transport.serving import running
from tests.support.gateway_runs import POST, countdown, gateway_over, messages
from tests.support.mcp_helpers import INITIALIZE
from tests.support.processes import free_port
from tests.support.redis_server import redis_server
from tests.support.resets import reference_server
from tests.support.tokens import (
    ISSUER,
    METADATA_URL,
    RESOURCE,
    TOKENS,
    as_principal,
    bearer,
    challenge,
    jwt_auth,
    rsa_key,
    sign,
    token_auth,
    write_jwks,
)

ORIGIN = "http://localhost:5173"  # a loopback Origin: one the gateway trusts


def ping(ident: int = 90) -> dict:
    return {"jsonrpc": "2.0", "id": ident, "method": "ping"}


def echo(ident: int) -> dict:
    params = {"name": "echo", "arguments": {"text": "hello"}}
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


def opened(http: httpx.Client, url: str, auth: dict[str, str]) -> dict[str, str]:
    """A session opened (and initialized) with ``auth``: the headers of its requests."""
    answer = http.post(url, json=INITIALIZE, headers={**POST, **auth})
    assert answer.status_code == 200, answer.text
    headers = {
        **POST,
        **auth,
        "Mcp-Session-Id": answer.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    note = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert note.status_code == 202, note.text
    return headers


def works(http: httpx.Client, url: str, headers: dict[str, str], ident: int = 90) -> None:
    answer = http.post(url, json=ping(ident), headers=headers)
    assert answer.status_code == 200, answer.text
    assert [m.get("id") for m in messages(Decoder().feed(answer.content))] == [ident]


def sse(headers: dict[str, str]) -> dict[str, str]:
    return {**headers, "Accept": "text/event-stream"}


@pytest.fixture(scope="module")
def tokens(upstream):
    with gateway_over(upstream, auth=token_auth()) as gw:
        yield gw


@pytest.fixture(scope="module")
def key():
    return rsa_key()


@pytest.fixture(scope="module")
def jwks(tmp_path_factory, key) -> Path:
    return write_jwks(tmp_path_factory.mktemp("jwks") / "jwks.json", key)


@pytest.fixture(scope="module")
def jwts(upstream, jwks):
    with gateway_over(upstream, auth=jwt_auth(jwks)) as gw:
        yield gw


def root_of(url: str) -> str:
    return url.rsplit("/", 1)[0]


# -- static tokens ------------------------------------------------------------------------------


def test_no_credentials_is_a_401_with_a_bearer_challenge_naming_no_error(tokens):
    answer = httpx.post(tokens.url, json=INITIALIZE, headers=POST, timeout=10)
    assert answer.status_code == 401
    params = challenge(answer.headers.get("www-authenticate"))
    assert "error" not in params  # RFC 6750 section 3.1: no credentials, no error code
    assert params.get("realm")
    assert "resource_metadata" not in params  # static tokens: no authorization server to point at
    assert "mcp-session-id" not in answer.headers


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer not-a-known-token",
        "Bearer " + TOKENS["alice"] + "x",
        "bearer " + TOKENS["alice"][:-1],
    ],
    ids=["unknown", "longer", "shorter"],
)
def test_a_wrong_token_is_a_401_invalid_token(tokens, authorization):
    answer = httpx.post(
        tokens.url, json=INITIALIZE, headers={**POST, "Authorization": authorization}, timeout=10
    )
    assert answer.status_code == 401
    params = challenge(answer.headers.get("www-authenticate"))
    assert params["error"] == "invalid_token"
    assert TOKENS["alice"][:10] not in answer.text + answer.headers["www-authenticate"]


@pytest.mark.parametrize(
    "authorization",
    [
        b"Basic YWxpY2U6cHc=",
        b"Bearer",
        b"Bearer ==",
        b"Bearer a b",
        b"Bearer \xff\xfe",
        b"Bearer " + b"A" * 20000,
    ],
    ids=["basic", "no-token", "padding-only", "two-words", "not-ascii", "huge"],
)
def test_malformed_credentials_are_a_401_never_a_500(tokens, authorization):
    answer = httpx.post(
        tokens.url, json=INITIALIZE, headers={**POST, "Authorization": authorization}, timeout=10
    )
    assert answer.status_code in (400, 401, 431), answer.text
    if answer.status_code == 401:
        assert challenge(answer.headers.get("www-authenticate")).get("error") in (None, "invalid_request")


def test_a_token_in_the_query_string_is_not_accepted(tokens):
    """MCP authorization (2025-11-25): access tokens MUST NOT travel in the URI query."""
    answer = httpx.post(
        tokens.url, params={"access_token": TOKENS["alice"]}, json=INITIALIZE, headers=POST, timeout=10
    )
    assert answer.status_code == 401
    assert "mcp-session-id" not in answer.headers


def test_two_authorization_headers_are_refused_not_one_picked(tokens):
    """A repeated Authorization (not a list field, RFC 9110 section 5.3) is ``invalid_request``
    (RFC 6750 section 3.1: it repeats a parameter): a proxy checking the first and the
    gateway believing the last would disagree about who is calling."""
    for pair in (("bob", "alice"), ("alice", "alice")):
        headers = [*POST.items(), *(("Authorization", f"Bearer {TOKENS[name]}") for name in pair)]
        answer = httpx.post(tokens.url, json=INITIALIZE, headers=headers, timeout=10)
        assert answer.status_code in (400, 401), answer.text
        assert "mcp-session-id" not in answer.headers


def test_the_right_token_opens_a_session_that_serves_calls(tokens):
    with httpx.Client(timeout=10) as http:
        headers = opened(http, tokens.url, as_principal("alice"))
        answer = http.post(tokens.url, json=echo(2), headers=headers)
        assert answer.status_code == 200
        result = [m for m in messages(Decoder().feed(answer.content)) if m.get("id") == 2]
        assert result and "result" in result[0]
        # every request of the session needs the token, not just the first
        bare = {name: value for name, value in headers.items() if name != "Authorization"}
        assert http.post(tokens.url, json=ping(), headers=bare).status_code == 401
        assert http.delete(tokens.url, headers=headers).status_code == 200


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]
)
def test_static_tokens_serve_no_protected_resource_metadata(tokens, path):
    assert httpx.get(root_of(tokens.url) + path, timeout=10).status_code == 404


def test_the_preflight_is_served_without_credentials_and_lets_the_authorization_header_through(tokens):
    """A browser sends the preflight without credentials; ``*`` in Access-Control-Allow-Headers
    does not cover Authorization (Fetch standard: it must be named), so it must be named."""
    asked = {
        "Origin": ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
    }
    answer = httpx.options(tokens.url, headers=asked, timeout=10)
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in answer.headers["access-control-allow-methods"]
    allowed = {name.strip().lower() for name in answer.headers["access-control-allow-headers"].split(",")}
    assert "authorization" in allowed


def test_a_foreign_origin_gets_no_preflight(tokens):
    asked = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    answer = httpx.options(tokens.url, headers=asked, timeout=10)
    assert answer.status_code == 403
    assert "access-control-allow-origin" not in answer.headers


def test_a_browser_client_can_read_the_challenge_of_a_401(tokens):
    """The 401 to a trusted Origin carries CORS headers exposing WWW-Authenticate, else a
    browser client never learns what to do (the header is not CORS-safelisted)."""
    answer = httpx.post(tokens.url, json=INITIALIZE, headers={**POST, "Origin": ORIGIN}, timeout=10)
    assert answer.status_code == 401
    assert answer.headers.get("access-control-allow-origin") == ORIGIN
    exposed = {
        name.strip().lower() for name in answer.headers.get("access-control-expose-headers", "").split(",")
    }
    assert "www-authenticate" in exposed


async def _status_of(app, host: str, peer: tuple[str, int] | None) -> int:
    """The status ``app`` answers a bare POST /mcp with, from ``peer`` naming ``host``."""
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "headers": [(b"host", host.encode()), (b"content-type", b"application/json")],
        "client": peer,
        "server": ("0.0.0.0", 8080),
    }
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"]


@pytest.mark.parametrize(
    "host, peer, status",
    [
        ("127.0.0.1:8080", ("192.0.2.7", 40000), 403),  # a remote client naming loopback
        ("localhost:8080", ("192.0.2.7", 40000), 403),
        ("[::1]:8080", ("2001:db8::7", 40000), 403),
        ("127.0.0.1:8080", ("127.0.0.1", 40000), 401),  # a local one: on to authentication
        ("[::1]:8080", ("::1", 40000), 401),
        ("gw.example", ("192.0.2.7", 40000), 401),  # the name clients use, allowed
        ("other.example", ("127.0.0.1", 40000), 403),
    ],
)
def test_a_loopback_host_is_accepted_only_from_a_loopback_peer(host, peer, status):
    app = Gateway("http://127.0.0.1:9/mcp", auth=token_auth(), allowed_hosts=["gw.example"])

    async def scenario():
        try:
            return await _status_of(app, host, peer)
        finally:
            await app.aclose()

    assert asyncio.run(scenario()) == status


# -- JWTs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]
)
def test_jwt_mode_serves_the_rfc9728_metadata_without_credentials(jwts, path):
    answer = httpx.get(root_of(jwts.url) + path, timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    document = answer.json()
    assert document["resource"] == RESOURCE
    assert document["authorization_servers"] == [ISSUER]
    assert document["scopes_supported"] == ["mcp"]
    assert document.get("bearer_methods_supported", ["header"]) == ["header"]


def test_a_401_points_at_the_metadata_and_names_the_scope(jwts):
    answer = httpx.post(jwts.url, json=INITIALIZE, headers=POST, timeout=10)
    assert answer.status_code == 401
    params = challenge(answer.headers.get("www-authenticate"))
    assert params["resource_metadata"] == METADATA_URL
    assert params.get("scope") == "mcp"  # MCP 2025-11-25: SHOULD name the scopes to ask for
    assert "error" not in params
    # the document it names is the one this gateway serves (its path, here)
    path = METADATA_URL.removeprefix("https://gw.example")
    assert httpx.get(root_of(jwts.url) + path, timeout=10).json()["resource"] == RESOURCE


def test_a_valid_jwt_is_served(jwts, key):
    with httpx.Client(timeout=10) as http:
        headers = opened(http, jwts.url, bearer(sign(key)))
        works(http, jwts.url, headers)
        assert http.delete(jwts.url, headers=headers).status_code == 200


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "https://other.example/mcp"},
        {"exp": int(time.time()) - 60, "iat": int(time.time()) - 600},
        {"iss": "https://other-as.example"},
        {"sub": None},
    ],
    ids=["wrong-audience", "expired", "wrong-issuer", "no-subject"],
)
def test_a_jwt_failing_a_claim_is_a_401_invalid_token(jwts, key, claims):
    answer = httpx.post(
        jwts.url, json=INITIALIZE, headers={**POST, **bearer(sign(key, **claims))}, timeout=10
    )
    assert answer.status_code == 401
    params = challenge(answer.headers.get("www-authenticate"))
    assert params["error"] == "invalid_token"
    assert params["resource_metadata"] == METADATA_URL


def test_a_jwt_signed_by_another_key_is_a_401(jwts):
    answer = httpx.post(jwts.url, json=INITIALIZE, headers={**POST, **bearer(sign(rsa_key()))}, timeout=10)
    assert answer.status_code == 401
    assert challenge(answer.headers.get("www-authenticate"))["error"] == "invalid_token"


def test_a_jwt_without_the_required_scope_is_a_403_insufficient_scope(jwts, key):
    answer = httpx.post(
        jwts.url, json=INITIALIZE, headers={**POST, **bearer(sign(key, scope="read"))}, timeout=10
    )
    assert answer.status_code == 403
    params = challenge(answer.headers.get("www-authenticate"))
    assert params["error"] == "insufficient_scope"
    assert params["scope"] == "mcp"
    assert params["resource_metadata"] == METADATA_URL


# -- sessions bound to their principal ----------------------------------------------------------


def test_another_principal_cannot_use_a_session_and_its_owner_keeps_it(tokens):
    with httpx.Client(timeout=10) as http:
        alice = opened(http, tokens.url, as_principal("alice"))
        bob = {**alice, **as_principal("bob")}
        # a call of Alice's under way, read up to its first message: its cursor is known
        decoder, first = Decoder(), []
        with http.stream("POST", tokens.url, json=countdown(7, 5, 0.1), headers=alice) as answer:
            assert answer.status_code == 200
            for chunk in answer.iter_bytes():
                first += decoder.feed(chunk)
                if messages(first):
                    break
        cursor = decoder.last_event_id
        assert cursor
        unknown = {**bob, "Mcp-Session-Id": secrets.token_hex(16)}
        stranger = http.post(tokens.url, json=echo(3), headers=unknown)
        assert stranger.status_code == 404

        attempts = [
            ("POST", bob, echo(3)),
            ("GET", sse(bob), None),
            ("GET", {**sse(bob), "Last-Event-ID": cursor}, None),
            ("DELETE", bob, None),
        ]
        for method, headers, body in attempts:
            answer = http.request(method, tokens.url, headers=headers, json=body)
            assert answer.status_code == 404, (method, headers.get("Last-Event-ID"), answer.text)
            assert answer.text == stranger.text  # the same 404 as no session at all: nothing learnt
            works(http, tokens.url, alice)  # Alice's session goes on

        resumed = http.get(tokens.url, headers={**sse(alice), "Last-Event-ID": cursor})
        assert resumed.status_code == 200
        got = messages(first) + messages(Decoder().feed(resumed.content))
        assert [m["params"]["progress"] for m in got if "method" in m] == [1, 2, 3, 4, 5]
        assert [m["id"] for m in got if "result" in m] == [7]
        assert http.delete(tokens.url, headers=alice).status_code == 200
        assert http.post(tokens.url, json=ping(), headers=alice).status_code == 404


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


def test_a_session_is_bound_to_its_principal_across_replicas(upstream, redis_url):
    with (
        gateway_over(upstream, auth=token_auth(), store=RedisStore.from_url(redis_url), replica=True) as one,
        gateway_over(upstream, auth=token_auth(), store=RedisStore.from_url(redis_url), replica=True) as two,
        httpx.Client(timeout=10) as http,
    ):
        alice = opened(http, one.url, as_principal("alice"))
        bob = {**alice, **as_principal("bob")}
        for method, headers, body in [("POST", bob, ping()), ("GET", sse(bob), None), ("DELETE", bob, None)]:
            answer = http.request(method, two.url, headers=headers, json=body)
            assert answer.status_code == 404, (method, answer.text)
        assert http.post(one.url, json=ping(), headers=bob).status_code == 404
        works(http, two.url, alice)  # taken up at the second replica for its owner
        works(http, one.url, alice)
        assert http.post(two.url, json=ping(), headers=bob).status_code == 404  # now known there too
        assert http.delete(two.url, headers=alice).status_code == 200
        assert http.post(one.url, json=ping(), headers=alice).status_code == 404


# -- /metrics -----------------------------------------------------------------------------------


def test_metrics_are_behind_the_same_auth(tokens):
    metrics = root_of(tokens.url) + "/metrics"
    refused = httpx.get(metrics, timeout=10)
    assert refused.status_code == 401
    assert challenge(refused.headers.get("www-authenticate")).get("realm")
    assert httpx.get(metrics, headers=bearer("not-a-token"), timeout=10).status_code == 401
    served = httpx.get(metrics, headers=as_principal("bob"), timeout=10)
    assert served.status_code == 200
    assert "ssewire_gateway_" in served.text
    assert TOKENS["alice"] not in served.text and "alice" not in served.text  # no principal's name


def test_metrics_served_apart_are_not_on_the_main_app(upstream):
    with gateway_over(upstream, auth=token_auth(), serve_metrics=False) as gw:
        main = root_of(gw.url) + "/metrics"
        assert httpx.get(main, headers=as_principal("alice"), timeout=10).status_code == 404
        with running(gw.app.metrics_app(), lifespan="off") as apart:
            served = httpx.get(apart + "/metrics", timeout=10)
            assert served.status_code == 200 and "ssewire_gateway_" in served.text
            assert httpx.get(apart + "/mcp", timeout=10).status_code == 404
            assert httpx.post(apart + "/metrics", timeout=10).status_code == 404


# -- quotas ---------------------------------------------------------------------------------------


def test_a_principal_over_its_session_quota_gets_a_429_and_others_are_served(upstream):
    with (
        gateway_over(upstream, auth=token_auth(), limits=Limits(sessions=2)) as gw,
        httpx.Client(timeout=10) as http,
    ):
        first = opened(http, gw.url, as_principal("alice"))
        opened(http, gw.url, as_principal("alice"))
        third = http.post(gw.url, json=INITIALIZE, headers={**POST, **as_principal("alice")})
        assert third.status_code == 429, third.text
        assert int(third.headers["retry-after"]) >= 1
        assert "mcp-session-id" not in third.headers
        opened(http, gw.url, as_principal("bob"))  # another principal's share is its own
        works(http, gw.url, first)
        assert http.delete(gw.url, headers=first).status_code == 200
        opened(http, gw.url, as_principal("alice"))  # a session ended gives its place back


def test_a_second_get_stream_over_the_stream_quota_gets_a_429(upstream):
    with (
        gateway_over(upstream, auth=token_auth(), limits=Limits(streams=1)) as gw,
        httpx.Client(timeout=10) as http,
    ):
        alice = opened(http, gw.url, as_principal("alice"))
        other = opened(http, gw.url, as_principal("alice"))
        with (
            httpx.Client(timeout=10) as streaming,
            streaming.stream("GET", gw.url, headers=sse(alice)) as held,
        ):
            assert held.status_code == 200
            second = http.get(gw.url, headers=sse(other))
            assert second.status_code == 429, second.text
            assert int(second.headers["retry-after"]) >= 1
            bobs = opened(http, gw.url, as_principal("bob"))
            with http.stream("GET", gw.url, headers=sse(bobs)) as his:
                assert his.status_code == 200  # Bob's share is his own
        deadline = time.monotonic() + 8
        while True:  # the stream closed, its place is given back
            with http.stream("GET", gw.url, headers=sse(other)) as again:
                if again.status_code == 200:
                    break
                assert again.status_code == 429 and time.monotonic() < deadline
            time.sleep(0.1)


@pytest.mark.parametrize("ident", [5, 5.0], ids=["integer-id", "integral-float-id"])
def test_a_second_call_over_the_call_quota_gets_a_429_until_the_first_ends(upstream, ident):
    """The share is held by the call's task, whatever its id's JSON spelling (5.0 is a
    request id too, and once slipped past the count)."""
    with (
        gateway_over(upstream, auth=token_auth(), limits=Limits(calls=1)) as gw,
        httpx.Client(timeout=10) as http,
    ):
        alice = opened(http, gw.url, as_principal("alice"))
        with http.stream("POST", gw.url, json=countdown(ident, 6, 0.15), headers=alice) as running_call:
            decoder, seen = Decoder(), []
            chunks = running_call.iter_bytes()
            for chunk in chunks:
                seen += decoder.feed(chunk)
                if messages(seen):
                    break
            second = http.post(gw.url, json=ping(6), headers=alice)
            assert second.status_code == 429, second.text
            assert int(second.headers["retry-after"]) >= 1
            works(http, gw.url, opened(http, gw.url, as_principal("bob")), 7)  # not Bob's share
            for chunk in chunks:
                seen += decoder.feed(chunk)
        assert [m["id"] for m in messages(seen) if "result" in m] == [5]
        deadline = time.monotonic() + 5
        while (answer := http.post(gw.url, json=ping(8), headers=alice)).status_code == 429:
            assert time.monotonic() < deadline, "the call's share was never given back"
            time.sleep(0.05)
        assert answer.status_code == 200


def test_a_chunked_body_is_served_under_a_byte_quota_below_the_message_limit(upstream):
    """A body without Content-Length (chunked) is small here; refusing it because it *might*
    reach the message limit (16 MiB) makes every chunked request of every client a 429 for
    ever once the byte quota is set below that limit: it must be charged as it arrives."""
    body = orjson.dumps(INITIALIZE)
    with gateway_over(upstream, auth=token_auth(), limits=Limits(bytes=1 << 20)) as gw:
        sized = httpx.post(gw.url, content=body, headers={**POST, **as_principal("alice")}, timeout=10)
        assert sized.status_code == 200
        chunked = httpx.post(
            gw.url, content=iter([body]), headers={**POST, **as_principal("alice")}, timeout=10
        )
        assert chunked.status_code == 200, chunked.text


# -- the upstream side ----------------------------------------------------------------------------


class Spy:
    """The reference server, recording the headers of every request it gets."""

    def __init__(self) -> None:
        self.app = reference_server()
        self.seen: list[dict[str, str]] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            self.seen.append({k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]})
        await self.app(scope, receive, send)


def test_the_client_token_never_goes_upstream_the_operator_s_does():
    spy = Spy()
    with (
        running(spy) as root,
        gateway_over(root + "/mcp", auth=token_auth(), headers={"Authorization": "Bearer operator"}) as gw,
        httpx.Client(timeout=10) as http,
    ):
        for refused in ({}, bearer("not-a-token")):  # refused downstream: nothing goes up
            assert http.post(gw.url, json=INITIALIZE, headers={**POST, **refused}).status_code == 401
        assert spy.seen == []
        alice = opened(http, gw.url, as_principal("alice"))
        works(http, gw.url, alice)
        answer = http.post(gw.url, json=echo(3), headers=alice)
        assert answer.status_code == 200
        with http.stream("GET", gw.url, headers=sse(alice)) as listening:
            assert listening.status_code == 200
        assert http.delete(gw.url, headers=alice).status_code == 200
        time.sleep(0.2)  # the upstream DELETE of the session may follow the answer
    assert spy.seen
    for headers in spy.seen:
        assert headers.get("authorization") == "Bearer operator"
        assert not any(TOKENS["alice"] in value for value in headers.values())


def refusing_upstream(challenge_value: str):
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        headers = [(b"www-authenticate", challenge_value.encode()), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"error":"invalid_token"}'})

    return app


def test_an_upstream_401_is_a_502_json_rpc_error_naming_its_challenge():
    said = 'Bearer error="invalid_token", resource_metadata="https://up.example/.well-known/oauth-protected-resource?k=SECRET"'
    with (
        running(refusing_upstream(said), lifespan="off") as root,
        gateway_over(root + "/mcp", auth=token_auth()) as gw,
    ):
        answer = httpx.post(gw.url, json=INITIALIZE, headers={**POST, **as_principal("alice")}, timeout=10)
    assert answer.status_code == 502
    assert "www-authenticate" not in answer.headers  # the gateway's client is not the one refused
    error = answer.json()["error"]
    assert answer.json()["id"] == INITIALIZE["id"]
    assert error["data"]["status"] == 401
    assert 'error="invalid_token"' in error["data"]["challenge"]
    assert "SECRET" not in answer.text


@pytest.mark.parametrize(
    "upstream_url",
    ["http://127.0.0.1:{port}/mcp?api_key=SECRET", "http://user:SECRET@127.0.0.1:{port}/mcp"],
    ids=["query", "userinfo"],
)
def test_an_upstream_that_refuses_connections_is_a_502_naming_no_secret(upstream_url, caplog):
    with gateway_over(upstream_url.format(port=free_port()), auth=token_auth()) as gw:
        answer = httpx.post(gw.url, json=INITIALIZE, headers={**POST, **as_principal("alice")}, timeout=10)
    assert answer.status_code == 502
    assert answer.json()["error"]["code"] < 0
    assert "SECRET" not in answer.text
    assert "SECRET" not in caplog.text


# -- junk ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cursor",
    [
        "1-²".encode(),
        "1-²".encode("latin-1"),
        "²-1".encode(),
        "١-١".encode(),  # Arabic-Indic digits: isdigit, but not ours
        b"",
        b"1 - 1",
        b"-",
        b"1-",
        b"-1",
        b"1-1-1",
        b"+1-1",
        b"1_0-1",
        b"99999999999999999999-1",
        b"9" * 200,
        b"0x1-0x1",
        b"\xff\xfe",
    ],
)
def test_a_junk_last_event_id_is_a_409_or_400_never_a_500(tokens, cursor):
    with httpx.Client(timeout=10) as http:
        alice = opened(http, tokens.url, as_principal("alice"))
        answer = http.get(tokens.url, headers={**sse(alice), "Last-Event-ID": cursor})
        assert answer.status_code in (400, 409), answer.text
        assert answer.json()["error"]["code"] < 0
        works(http, tokens.url, alice)
        http.delete(tokens.url, headers=alice)


@pytest.mark.parametrize(
    "sid", ["²".encode(), b"\xff", b"a" * 5000, b"", b"x y"], ids=["super", "ff", "long", "empty", "spaces"]
)
def test_a_junk_session_id_is_a_4xx_never_a_500(tokens, sid):
    headers = {**POST, **as_principal("alice"), "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    for method in ("POST", "GET", "DELETE"):
        answer = httpx.request(method, tokens.url, headers=headers, json=ping(), timeout=10)
        assert 400 <= answer.status_code < 500, (method, answer.text)


# -- the command -----------------------------------------------------------------------------------


def gateway_command(*argv: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ssewire",
        "gateway",
        "--upstream",
        "http://127.0.0.1:9/mcp",
        "--start-timeout",
        "0",
        *argv,
    ]


def test_the_command_refuses_to_bind_beyond_loopback_without_auth():
    done = subprocess.run(
        gateway_command("--host", "0.0.0.0", "--port", str(free_port())),
        capture_output=True,
        text=True,
        timeout=15,
    )
    assert done.returncode == 2, done.stderr
    assert "--insecure-no-auth" in done.stderr


def serves(argv: list[str], within: float = 12.0) -> str:
    """Start the command; the line it prints once serving (it is killed after)."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if line.startswith("ssewire gateway: http://"):
                found.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert found.wait(within), "".join(lines)
        assert process.poll() is None, "".join(lines)
        return next(line for line in lines if line.startswith("ssewire gateway: http://"))
    finally:
        process.kill()
        process.wait(10)
        reader.join(5)


def test_the_command_binds_beyond_loopback_when_told_insecure_or_given_tokens(tmp_path):
    line = serves(gateway_command("--host", "0.0.0.0", "--port", str(free_port()), "--insecure-no-auth"))
    assert "auth: off" in line
    tokens = tmp_path / "tokens"
    tokens.write_text("alice:" + "ab" * 32 + "\n")
    line = serves(
        gateway_command("--host", "0.0.0.0", "--port", str(free_port()), "--auth-tokens", str(tokens))
    )
    assert "auth: tokens" in line


def test_the_command_refuses_a_token_file_it_cannot_use(tmp_path):
    bad = tmp_path / "bad"
    bad.write_text("# one line of junk\nalice:" + TOKENS["alice"] + "\n")
    for path, said in ((tmp_path / "missing.txt", "missing.txt"), (bad, "line 2")):
        done = subprocess.run(
            gateway_command("--auth-tokens", str(path), "--port", str(free_port())),
            capture_output=True,
            text=True,
            timeout=15,
        )
        assert done.returncode == 2, done.stderr
        assert "--auth-tokens" in done.stderr and said in done.stderr
        assert TOKENS["alice"] not in done.stderr  # the file's text may be a token: never echoed
