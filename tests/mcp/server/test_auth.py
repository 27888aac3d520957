"""The server core's authentication: static tokens hashed at rest, JWT access tokens checked
against a JWKS (a file, or a URL served on 127.0.0.1 here), RFC 6750 challenges and RFC 9728
metadata paths. Keys are made with cryptography, tokens signed with PyJWT."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import re
import time

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from ssewire.mcp.server import auth
from ssewire.mcp.server.auth import (
    AuthFailure,
    JwtAuth,
    TokenAuth,
    hash_token,
    metadata_paths,
    resource_metadata_url,
    token_line,
)
from ssewire.mcp.transport.serving import running
from tests.support.processes import free_port

ISSUER = "https://as.example"
RESOURCE = "https://gw.example/mcp"
METADATA_URL = "https://gw.example/.well-known/oauth-protected-resource/mcp"
SHARED = "a shared secret of thirty-two bytes"


# -- keys, JWKS files, tokens -------------------------------------------------------------------


@pytest.fixture(scope="module")
def rsa_a():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def rsa_b():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def ec_key():
    return ec.generate_private_key(ec.SECP256R1())


def jwk(private_key, kid: str | None, **extra) -> dict:
    public = private_key.public_key()
    algorithm = (
        jwt.algorithms.RSAAlgorithm if isinstance(public, rsa.RSAPublicKey) else jwt.algorithms.ECAlgorithm
    )
    data = json.loads(algorithm.to_jwk(public))
    if kid is not None:
        data["kid"] = kid
    return {**data, **extra}


def jwks_bytes(*keys: dict) -> bytes:
    return json.dumps({"keys": list(keys)}).encode()


def write_jwks(path, *keys: dict):
    path.write_bytes(jwks_bytes(*keys))
    return path


def sign(private_key, kid: str | None = "a", alg: str = "RS256", **claims) -> str:
    now = int(time.time())
    payload = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "exp": now + 300, "iat": now, "scope": "mcp"}
    payload.update(claims)
    payload = {name: value for name, value in payload.items() if value is not None}
    return jwt.encode(payload, private_key, algorithm=alg, headers={"kid": kid} if kid is not None else None)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged(header: dict, payload: dict, signature: bytes = b"") -> str:
    """A JWT put together by hand (PyJWT refuses to make these)."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"
    return f"{signing_input}.{b64(signature)}"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def jwt_auth(jwks, **options) -> JwtAuth:
    settings = {"issuer": ISSUER, "audience": RESOURCE, "resource": RESOURCE, "scopes": ["mcp"]}
    settings.update(options)
    return JwtAuth(jwks=str(jwks), **settings)


def refusal(authenticator, header: str | None) -> AuthFailure:
    with pytest.raises(AuthFailure) as caught:
        asyncio.run(authenticator.authenticate(header))
    return caught.value


def challenge_of(authenticator, failure: AuthFailure) -> dict[str, str]:
    """The one WWW-Authenticate header of the answer, parsed back; it must be exactly
    ``Bearer name="value", name="value", ...`` with each name once."""
    headers = authenticator.challenge(failure)
    assert [name for name, _ in headers] == ["www-authenticate"]
    value = headers[0][1]
    assert value.startswith("Bearer ")
    rest = value[len("Bearer ") :]
    pairs = re.findall(r'([a-z_]+)="([^"\\]*)"', rest)
    assert ", ".join(f'{name}="{text}"' for name, text in pairs) == rest
    params = dict(pairs)
    assert len(params) == len(pairs)
    return params


@pytest.fixture
def keys_file(tmp_path, rsa_a, ec_key):
    return write_jwks(tmp_path / "jwks.json", jwk(rsa_a, "a"), jwk(ec_key, "e"))


# -- JwtAuth: what a token must be --------------------------------------------------------------


def test_a_valid_token_names_its_subject(keys_file, rsa_a, ec_key):
    authenticator = jwt_auth(keys_file)

    async def calls():
        return [
            await authenticator.authenticate(f"Bearer {sign(rsa_a)}"),
            await authenticator.authenticate(f"bearer {sign(rsa_a, sub='bob')}"),
            await authenticator.authenticate(f"BEARER {sign(ec_key, 'e', 'ES256', sub='carol')}"),
            await authenticator.authenticate(f"Bearer {sign(rsa_a, alg='PS256', sub='dave')}"),
        ]

    assert asyncio.run(calls()) == ["alice", "bob", "carol", "dave"]


def test_the_audience_may_be_a_list_holding_this_resource(keys_file, rsa_a):
    authenticator = jwt_auth(keys_file)
    assert (
        asyncio.run(authenticator.authenticate(f"Bearer {sign(rsa_a, aud=['other', RESOURCE])}")) == "alice"
    )
    failure = refusal(authenticator, f"Bearer {sign(rsa_a, aud=['https://other.example/mcp'])}")
    assert (failure.status, failure.error) == (401, "invalid_token")
    assert "aud" in failure.description


@pytest.mark.parametrize(
    ("claims", "said"),
    [
        ({"aud": "https://other.example/mcp"}, "aud"),
        ({"iss": "https://evil.example"}, "iss"),
        ({"exp": -120}, "expired"),  # seconds from when the test runs (not from collection)
        ({"nbf": 120}, "not valid yet"),
        ({"exp": None}, "exp claim"),
        ({"sub": None}, "sub claim"),
        ({"iss": None}, "iss claim"),
        ({"aud": None}, "aud claim"),
        ({"sub": ""}, "sub"),
    ],
    ids=["audience", "issuer", "expired", "nbf-ahead", "no-exp", "no-sub", "no-iss", "no-aud", "empty-sub"],
)
def test_a_token_failing_a_claim_check_is_an_invalid_token(keys_file, rsa_a, claims, said):
    now = int(time.time())
    claims = {k: now + v if k in ("exp", "nbf") and v is not None else v for k, v in claims.items()}
    token = sign(rsa_a, **claims)
    authenticator = jwt_auth(keys_file)
    failure = refusal(authenticator, f"Bearer {token}")
    assert (failure.status, failure.error) == (401, "invalid_token")
    assert said in failure.description
    assert token.split(".")[2] not in failure.description and "evil" not in failure.description
    params = challenge_of(authenticator, failure)
    assert params == {
        "resource_metadata": METADATA_URL,
        "error": "invalid_token",
        "error_description": failure.description,
        "scope": "mcp",
    }


def test_the_leeway_forgives_a_little_clock_skew_only(keys_file, rsa_a):
    authenticator = jwt_auth(keys_file, leeway=30)
    assert (
        asyncio.run(authenticator.authenticate(f"Bearer {sign(rsa_a, exp=int(time.time()) - 5)}")) == "alice"
    )
    assert (
        asyncio.run(authenticator.authenticate(f"Bearer {sign(rsa_a, nbf=int(time.time()) + 5)}")) == "alice"
    )
    assert "expired" in refusal(authenticator, f"Bearer {sign(rsa_a, exp=int(time.time()) - 60)}").description
    strict = jwt_auth(keys_file, leeway=0)
    assert "expired" in refusal(strict, f"Bearer {sign(rsa_a, exp=int(time.time()) - 5)}").description


def test_a_token_signed_by_another_key_under_a_known_kid_is_refused(keys_file, rsa_b):
    failure = refusal(jwt_auth(keys_file), f"Bearer {sign(rsa_b, 'a')}")
    assert (failure.status, failure.error) == (401, "invalid_token")
    assert "signature" in failure.description


def test_alg_none_and_hmac_with_the_public_key_as_secret_are_refused(keys_file, rsa_a):
    now = int(time.time())
    payload = {"iss": ISSUER, "aud": RESOURCE, "sub": "mallory", "exp": now + 300, "scope": "mcp"}
    pem = rsa_a.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = forged({"alg": "HS256", "kid": "a", "typ": "JWT"}, payload).rsplit(".", 1)[0]
    hs256 = f"{signing_input}.{b64(hmac.new(pem, signing_input.encode(), hashlib.sha256).digest())}"
    # the forgery is a correct HS256 token under that "secret": only the algorithm gives it away
    assert jwt.decode(hs256, options={"verify_signature": False})["sub"] == "mallory"
    assert hmac.compare_digest(
        hs256.rsplit(".", 1)[1], b64(hmac.new(pem, signing_input.encode(), hashlib.sha256).digest())
    )
    tokens = {
        "none": forged({"alg": "none", "kid": "a"}, payload),
        "None": forged({"alg": "None", "kid": "a"}, payload),
        "HS256": hs256,
        "no-alg": forged({"kid": "a"}, payload, b"x"),
    }
    authenticator = jwt_auth(keys_file)
    for name, token in tokens.items():
        failure = refusal(authenticator, f"Bearer {token}")
        assert (failure.status, failure.error) == (401, "invalid_token"), name
        assert "algorithm is not accepted" in failure.description, name


def test_an_algorithm_that_does_not_fit_the_key_is_refused(keys_file, rsa_a, ec_key):
    # an RS256 token naming the EC key's kid, and an EC key used with RS256
    authenticator = jwt_auth(keys_file)
    failure = refusal(authenticator, f"Bearer {sign(rsa_a, 'e', 'RS256')}")
    assert "does not fit" in failure.description
    failure = refusal(authenticator, f"Bearer {sign(ec_key, 'a', 'ES256')}")
    assert "does not fit" in failure.description


def test_a_jwks_key_whose_alg_does_not_fit_its_kty_is_never_used(tmp_path, rsa_a, ec_key, caplog):
    path = write_jwks(
        tmp_path / "jwks.json",
        jwk(rsa_a, "a", alg="ES256"),  # an RSA key claiming an EC algorithm
        jwk(ec_key, "e", alg="HS256"),  # an algorithm never accepted
        {"kty": "oct", "kid": "h", "k": b64(SHARED.encode())},  # a symmetric key
        jwk(ec_key, "ok"),
    )
    authenticator = jwt_auth(path)
    with caplog.at_level(logging.WARNING, logger="ssewire.mcp.server.auth"):
        assert asyncio.run(authenticator.authenticate(f"Bearer {sign(ec_key, 'ok', 'ES256')}")) == "alice"
    for kid, token in [
        ("a", sign(rsa_a, "a")),
        ("e", sign(ec_key, "e", "ES256")),
        ("h", jwt.encode({"sub": "x"}, SHARED, algorithm="HS256", headers={"kid": "h"})),
    ]:
        failure = refusal(authenticator, f"Bearer {token}")
        assert failure.error == "invalid_token", kid
        assert "not known" in failure.description or "not accepted" in failure.description, kid
    skipped = [record.getMessage() for record in caplog.records]
    assert any("'a' skipped" in message for message in skipped)
    assert any("'e' skipped" in message for message in skipped)
    assert any("'h' skipped" in message for message in skipped)
    assert not any(SHARED in message or b64(SHARED.encode()) in message for message in skipped)


def test_a_private_key_in_the_jwks_is_not_used(tmp_path, rsa_a, caplog):
    private = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa_a))  # with "d"
    del private["key_ops"]  # as a careless issuer would publish it
    path = write_jwks(tmp_path / "jwks.json", {**private, "kid": "a"})
    with caplog.at_level(logging.WARNING, logger="ssewire.mcp.server.auth"):
        failure = refusal(jwt_auth(path), f"Bearer {sign(rsa_a)}")
    assert "unavailable" in failure.description  # no usable key at all
    assert any("'a' skipped: not a public signing key" in record.getMessage() for record in caplog.records)


def test_garbage_and_malformed_credentials(keys_file):
    authenticator = jwt_auth(keys_file)
    missing = refusal(authenticator, None)
    assert (missing.status, missing.error) == (401, None)
    assert challenge_of(authenticator, missing) == {"resource_metadata": METADATA_URL, "scope": "mcp"}
    for header in ["Basic YWxpY2U6cHc=", "Bearer", "Bearer a b", "Bearer tok@en"]:
        failure = refusal(authenticator, header)
        assert (failure.status, failure.error) == (401, "invalid_request"), header
    for header in ["Bearer abc", "Bearer a.b.c", "Bearer eyJhbGciOiJSUzI1NiJ9.e30"]:
        failure = refusal(authenticator, header)
        assert (failure.status, failure.error) == (401, "invalid_token"), header


def test_a_missing_scope_is_403_insufficient_scope_naming_the_scopes(keys_file, rsa_a):
    authenticator = jwt_auth(keys_file, scopes=["mcp:tools", "mcp:read"])
    granted = [
        sign(rsa_a, scope="mcp:read other mcp:tools"),
        sign(rsa_a, scope=None, scp=["mcp:tools", "mcp:read"]),
    ]
    for token in granted:
        assert asyncio.run(authenticator.authenticate(f"Bearer {token}")) == "alice"
    for claims in [
        {"scope": "mcp:read"},
        {"scope": None},
        {"scope": None, "scp": ["mcp:tools"]},
        {"scope": "mcp"},
    ]:
        failure = refusal(authenticator, f"Bearer {sign(rsa_a, **claims)}")
        assert (failure.status, failure.error, failure.scope) == (
            403,
            "insufficient_scope",
            "mcp:tools mcp:read",
        )
        assert challenge_of(authenticator, failure) == {
            "resource_metadata": METADATA_URL,
            "error": "insufficient_scope",
            "error_description": failure.description,
            "scope": "mcp:tools mcp:read",
        }


def test_without_required_scopes_the_challenge_names_none(keys_file, rsa_a):
    authenticator = jwt_auth(keys_file, scopes=())
    assert asyncio.run(authenticator.authenticate(f"Bearer {sign(rsa_a, scope=None)}")) == "alice"
    failure = refusal(authenticator, None)
    assert failure.scope is None
    assert challenge_of(authenticator, failure) == {"resource_metadata": METADATA_URL}


def test_metadata_is_the_rfc9728_document():
    authenticator = JwtAuth(
        jwks="/nonexistent",
        issuer=ISSUER,
        audience=RESOURCE,
        resource=RESOURCE,
        authorization_servers=["https://as1.example", "https://as2.example"],
        scopes=["mcp:tools"],
    )
    assert authenticator.metadata() == {
        "resource": RESOURCE,
        "authorization_servers": ["https://as1.example", "https://as2.example"],
        "scopes_supported": ["mcp:tools"],
        "bearer_methods_supported": ["header"],
    }
    # no authorization server given: the issuer is one (MCP needs at least one); no scopes, none listed
    plain = JwtAuth(jwks="/nonexistent", issuer=ISSUER, audience=RESOURCE, resource=RESOURCE)
    assert plain.metadata() == {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
    }


@pytest.mark.parametrize(
    "options",
    [
        {"resource": "https://gw.example/mcp#frag"},
        {"resource": "gw.example/mcp"},
        {"resource": 'https://gw.example/"mcp'},
        {"scopes": "mcp"},
        {"scopes": ["two words"]},
        {"issuer": ""},
        {"refresh_interval": 0},
        {"leeway": float("nan")},
    ],
)
def test_bad_settings_are_refused_at_construction(options):
    settings = {"jwks": "/x", "issuer": ISSUER, "audience": RESOURCE, "resource": RESOURCE, **options}
    with pytest.raises(ValueError):
        JwtAuth(**settings)


# -- JwtAuth: the key set -----------------------------------------------------------------------


@pytest.fixture
def reads(monkeypatch):
    """Every read of a JWKS file, counted."""
    counted: list[str] = []
    original = auth._read_file

    def counting(path):
        counted.append(path)
        return original(path)

    monkeypatch.setattr(auth, "_read_file", counting)
    return counted


def test_the_key_set_is_read_at_first_use_and_cached(keys_file, rsa_a, reads):
    authenticator = jwt_auth(keys_file)
    assert reads == []  # not at construction

    async def calls():
        return [await authenticator.authenticate(f"Bearer {sign(rsa_a, sub=f'u{n}')}") for n in range(5)]

    assert asyncio.run(calls()) == [f"u{n}" for n in range(5)]
    assert len(reads) == 1


def test_an_unknown_kid_refreshes_at_most_once_per_interval(tmp_path, rsa_a, rsa_b, reads):
    path = write_jwks(tmp_path / "jwks.json", jwk(rsa_a, "a"))
    clock = Clock()
    authenticator = jwt_auth(path, refresh_interval=30, clock=clock)

    async def scenario():
        assert await authenticator.authenticate(f"Bearer {sign(rsa_a)}") == "alice"
        assert len(reads) == 1
        write_jwks(path, jwk(rsa_a, "a"), jwk(rsa_b, "b"))  # a key added after start
        with pytest.raises(AuthFailure) as early:  # read just now: not read again yet
            await authenticator.authenticate(f"Bearer {sign(rsa_b, 'b')}")
        assert "not known" in early.value.description
        assert len(reads) == 1
        clock.now += 31
        # a flood of unknown kids at once: one read between them all
        flood = [authenticator.authenticate(f"Bearer {sign(rsa_b, f'random-{n}')}") for n in range(20)]
        outcomes = await asyncio.gather(*flood, return_exceptions=True)
        assert all(isinstance(outcome, AuthFailure) for outcome in outcomes)
        assert len(reads) == 2
        # the refresh found b: its tokens are in now, with no further read
        assert await authenticator.authenticate(f"Bearer {sign(rsa_b, 'b', sub='bob')}") == "bob"
        with pytest.raises(AuthFailure):  # another unknown kid within the interval: no read
            await authenticator.authenticate(f"Bearer {sign(rsa_b, 'c')}")
        assert len(reads) == 2
        clock.now += 31
        with pytest.raises(AuthFailure):
            await authenticator.authenticate(f"Bearer {sign(rsa_b, 'c')}")
        assert len(reads) == 3

    asyncio.run(scenario())


def test_a_key_added_later_is_accepted_after_the_refresh_interval(tmp_path, rsa_a, rsa_b, reads):
    path = write_jwks(tmp_path / "jwks.json", jwk(rsa_a, "a"))
    clock = Clock()
    authenticator = jwt_auth(path, refresh_interval=5, clock=clock)

    async def scenario():
        assert await authenticator.authenticate(f"Bearer {sign(rsa_a)}") == "alice"
        write_jwks(path, jwk(rsa_a, "a"), jwk(rsa_b, "b"))
        clock.now += 6
        assert await authenticator.authenticate(f"Bearer {sign(rsa_b, 'b', sub='bob')}") == "bob"

    asyncio.run(scenario())
    assert len(reads) == 2


def test_a_failed_refresh_keeps_the_keys_held(tmp_path, rsa_a, rsa_b, reads, caplog):
    path = write_jwks(tmp_path / "jwks.json", jwk(rsa_a, "a"))
    clock = Clock()
    authenticator = jwt_auth(path, clock=clock)

    async def scenario():
        assert await authenticator.authenticate(f"Bearer {sign(rsa_a)}") == "alice"
        path.write_text("{not json")
        clock.now += 31
        with pytest.raises(AuthFailure) as unknown:
            await authenticator.authenticate(f"Bearer {sign(rsa_b, 'b')}")
        assert "not known" in unknown.value.description
        assert await authenticator.authenticate(f"Bearer {sign(rsa_a, sub='again')}") == "again"

    with caplog.at_level(logging.WARNING, logger="ssewire.mcp.server.auth"):
        asyncio.run(scenario())
    assert len(reads) == 2
    assert any("unavailable: not JSON" in record.getMessage() for record in caplog.records)


def test_a_key_withdrawn_from_the_set_stops_working_after_max_age(tmp_path, rsa_a, rsa_b, reads):
    path = write_jwks(tmp_path / "jwks.json", jwk(rsa_a, "a"), jwk(rsa_b, "b"))
    clock = Clock()
    authenticator = jwt_auth(path, max_age=600, clock=clock)

    async def scenario():
        assert await authenticator.authenticate(f"Bearer {sign(rsa_b, 'b')}") == "alice"
        write_jwks(path, jwk(rsa_a, "a"))  # b withdrawn
        clock.now += 599
        assert await authenticator.authenticate(f"Bearer {sign(rsa_b, 'b')}") == "alice"  # cached
        clock.now += 2
        with pytest.raises(AuthFailure) as withdrawn:
            await authenticator.authenticate(f"Bearer {sign(rsa_b, 'b')}")
        assert "not known" in withdrawn.value.description
        assert await authenticator.authenticate(f"Bearer {sign(rsa_a)}") == "alice"

    asyncio.run(scenario())
    assert len(reads) == 2


def test_a_missing_or_oversize_jwks_file_is_a_401_not_an_exception(tmp_path, rsa_a, caplog):
    oversize = tmp_path / "big.json"
    oversize.write_bytes(padded_jwks(rsa_a))
    assert json.loads(oversize.read_bytes())["keys"][0]["kid"] == "a"  # a valid JWKS, only too large
    with caplog.at_level(logging.WARNING, logger="ssewire.mcp.server.auth"):
        for path in [tmp_path / "missing.json", oversize]:
            failure = refusal(jwt_auth(path), f"Bearer {sign(rsa_a)}")
            assert (failure.status, failure.error) == (401, "invalid_token")
            assert "keys are unavailable" in failure.description
    messages = [record.getMessage() for record in caplog.records]
    assert any("larger than 1048576 bytes" in message for message in messages)
    assert any("cannot read it" in message for message in messages)


def test_a_token_without_kid_uses_the_only_fitting_key(tmp_path, rsa_a, rsa_b, ec_key):
    one = write_jwks(tmp_path / "one.json", jwk(rsa_a, None), jwk(ec_key, "e"))
    assert asyncio.run(jwt_auth(one).authenticate(f"Bearer {sign(rsa_a, None)}")) == "alice"
    two = write_jwks(tmp_path / "two.json", jwk(rsa_a, "a"), jwk(rsa_b, "b"))
    failure = refusal(jwt_auth(two), f"Bearer {sign(rsa_a, None)}")
    assert "ambiguous" in failure.description


# -- JwtAuth: a JWKS over HTTP ------------------------------------------------------------------


class JwksServer:
    """A tiny ASGI app serving one JWKS; it counts its requests."""

    def __init__(self, body: bytes, status: int = 200, announce_length: bool = True) -> None:
        self.body, self.status, self.announce_length = body, status, announce_length
        self.hits = 0

    async def __call__(self, scope, receive, send):
        assert scope["type"] == "http"
        self.hits += 1
        headers = [(b"content-type", b"application/json")]
        if self.announce_length:
            headers.append((b"content-length", str(len(self.body)).encode()))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        for start in range(0, len(self.body), 65536):
            await send(
                {"type": "http.response.body", "body": self.body[start : start + 65536], "more_body": True}
            )
        await send({"type": "http.response.body", "body": b""})


def test_a_jwks_url_is_fetched_once_and_cached(rsa_a):
    server = JwksServer(jwks_bytes(jwk(rsa_a, "a")))
    with running(server, lifespan="off") as base:
        authenticator = jwt_auth(f"{base}/jwks.json")

        async def calls():
            return [await authenticator.authenticate(f"Bearer {sign(rsa_a, sub=f'u{n}')}") for n in range(3)]

        assert asyncio.run(calls()) == ["u0", "u1", "u2"]
    assert server.hits == 1


def test_a_jwks_url_through_the_callers_client(rsa_a):
    server = JwksServer(jwks_bytes(jwk(rsa_a, "a")), announce_length=False)
    with running(server, lifespan="off") as base:

        async def call():
            async with httpx.AsyncClient() as client:
                authenticator = jwt_auth(f"{base}/jwks.json", http=client)
                return await authenticator.authenticate(f"Bearer {sign(rsa_a)}")

        assert asyncio.run(call()) == "alice"
    assert server.hits == 1


def padded_jwks(private_key) -> bytes:
    """A valid JWKS, only larger than the limit."""
    body = jwks_bytes(jwk(private_key, "a"))
    return body[:-2] + b" " * auth.MAX_JWKS_BYTES + b"]}"


@pytest.mark.parametrize(
    "server",
    [
        JwksServer(b'{"error": "boom"}', status=500),
        JwksServer(b"<html>not json</html>"),
        JwksServer(b'{"keys": "none"}'),
        JwksServer(b'{"keys": []}'),
        "oversize-announced",
        "oversize-chunked",
    ],
    ids=["status-500", "not-json", "not-a-set", "no-keys", "oversize-announced", "oversize-chunked"],
)
def test_a_jwks_fetch_failure_is_a_401_logged_without_the_query(server, rsa_a, caplog):
    if isinstance(server, str):
        server = JwksServer(padded_jwks(rsa_a), announce_length=server == "oversize-announced")
    with running(server, lifespan="off") as base:
        authenticator = jwt_auth(f"{base}/jwks.json?api_key=sekrit-query")
        with caplog.at_level(logging.WARNING, logger="ssewire.mcp.server.auth"):
            failure = refusal(authenticator, f"Bearer {sign(rsa_a)}")
    assert (failure.status, failure.error) == (401, "invalid_token")
    assert "keys are unavailable" in failure.description
    assert server.hits == 1
    messages = [record.getMessage() for record in caplog.records]
    assert any(f"{base}/jwks.json unavailable" in message for message in messages)
    if len(server.body) > auth.MAX_JWKS_BYTES:
        assert json.loads(server.body)["keys"][0]["kid"] == "a"  # refused for its size alone
        assert any("larger than 1048576 bytes" in message for message in messages)
    assert not any("sekrit" in message for message in messages)


def test_an_unreachable_jwks_url_is_a_401(rsa_a, caplog):
    authenticator = jwt_auth(f"http://127.0.0.1:{free_port()}/jwks.json")
    with caplog.at_level(logging.WARNING, logger="ssewire.mcp.server.auth"):
        failure = refusal(authenticator, f"Bearer {sign(rsa_a)}")
    assert (failure.status, failure.error) == (401, "invalid_token")
    assert "keys are unavailable" in failure.description
    assert any("ConnectError" in record.getMessage() for record in caplog.records)


# -- TokenAuth ----------------------------------------------------------------------------------


def token_file(tmp_path, text: str, name: str = "tokens"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_hash_token_and_token_line():
    assert hash_token("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert (
        token_line("alice", "abc") == "alice:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    for principal in ["", "a:b", "a b", "a\tb", "a\nb"]:
        with pytest.raises(ValueError, match="principal"):
            token_line(principal, "abc")
    for token in ["", "a b", "tok@en", "é"]:
        with pytest.raises(ValueError, match="token"):
            token_line("alice", token)


def test_a_token_file_with_comments_blank_lines_and_crlf(tmp_path):
    text = f"# operators\r\n\r\n{token_line('alice', 'ta')}\r\n   \n  {token_line('bob', 'tb')}  \n# end\n"
    authenticator = TokenAuth.from_file(token_file(tmp_path, text))
    assert authenticator.principals == ["alice", "bob"]

    async def calls():
        return [await authenticator.authenticate("Bearer ta"), await authenticator.authenticate("Bearer tb")]

    assert asyncio.run(calls()) == ["alice", "bob"]


def test_an_upper_case_hash_is_the_same_hash(tmp_path):
    authenticator = TokenAuth.from_file(token_file(tmp_path, f"alice:{hash_token('ta').upper()}\n"))
    assert asyncio.run(authenticator.authenticate("Bearer ta")) == "alice"


@pytest.mark.parametrize(
    ("lines", "line", "said"),
    [
        (["# c", "alice:" + hash_token("t")[:-1]], 2, "not a 'principal:<sha256 hex>' line"),
        (["alice " + hash_token("t")], 1, "not a 'principal:<sha256 hex>' line"),
        (["", "the-raw-token-by-mistake"], 2, "not a 'principal:<sha256 hex>' line"),
        (["al ice:" + hash_token("t")], 1, "not a 'principal:<sha256 hex>' line"),
        ([":" + hash_token("t")], 1, "not a 'principal:<sha256 hex>' line"),
        (["alice:" + hash_token("t") + " # note"], 1, "not a 'principal:<sha256 hex>' line"),
        (["alice:" + "g" * 64], 1, "not a 'principal:<sha256 hex>' line"),
        (
            [token_line("alice", "t1"), "#", token_line("alice", "t2")],
            3,
            "principal 'alice' again (first on line 1)",
        ),
        ([token_line("alice", "t1"), token_line("bob", "t1")], 2, "the same token hash as line 1"),
        ([token_line("alice", "t1"), "bob:" + hash_token("t1").upper()], 2, "the same token hash as line 1"),
    ],
    ids=[
        "short-hash",
        "no-colon",
        "bare-token",
        "space-in-principal",
        "empty-principal",
        "trailing-comment",
        "not-hex",
        "duplicate-principal",
        "duplicate-hash",
        "duplicate-hash-other-case",
    ],
)
def test_a_bad_token_file_names_the_file_and_line_never_the_hash(tmp_path, lines, line, said):
    path = token_file(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(ValueError) as caught:
        TokenAuth.from_file(path)
    message = str(caught.value)
    assert message == f"{path}, line {line}: {said}"
    assert not re.search(r"[0-9a-fA-F]{16}", message.replace(str(path), ""))
    assert "the-raw-token" not in message


@pytest.mark.parametrize("text", ["", "\n\n", "# only comments\n\n# here\n"])
def test_a_token_file_without_tokens_is_refused(tmp_path, text):
    path = token_file(tmp_path, text)
    with pytest.raises(ValueError, match="no tokens"):
        TokenAuth.from_file(path)


def test_a_token_file_that_is_not_utf8_or_missing(tmp_path):
    path = tmp_path / "tokens"
    path.write_bytes(b"alice:\xff\xfe\n")
    with pytest.raises(ValueError, match="not UTF-8"):
        TokenAuth.from_file(path)
    with pytest.raises(FileNotFoundError):
        TokenAuth.from_file(tmp_path / "absent")


def test_token_auth_missing_malformed_and_unknown_credentials(tmp_path):
    authenticator = TokenAuth({"alice": hash_token("good-token")})
    assert authenticator.metadata() is None
    for header in [None, "", "   "]:
        failure = refusal(authenticator, header)
        assert (failure.status, failure.error) == (401, None), header
        assert authenticator.challenge(failure) == [("www-authenticate", 'Bearer realm="ssewire"')]
    for header in [
        "Basic YWxpY2U6cHc=",
        "Bearer",
        "Bearer ",
        "Bearer good token",
        "Bearergood-token",
        "Bearer g\u00f6od",
    ]:
        failure = refusal(authenticator, header)
        assert (failure.status, failure.error) == (401, "invalid_request"), header
        assert challenge_of(authenticator, failure) == {
            "realm": "ssewire",
            "error": "invalid_request",
            "error_description": failure.description,
        }
    failure = refusal(authenticator, "Bearer wrong-token")
    assert (failure.status, failure.error) == (401, "invalid_token")
    assert challenge_of(authenticator, failure) == {
        "realm": "ssewire",
        "error": "invalid_token",
        "error_description": "the bearer token is not known",
    }
    assert "wrong-token" not in repr(failure) and hash_token("wrong-token") not in repr(failure)


def test_the_bearer_scheme_is_case_insensitive(tmp_path):
    authenticator = TokenAuth({"alice": hash_token("good-token")})

    async def calls():
        return [
            await authenticator.authenticate(f"{scheme} good-token")
            for scheme in ("Bearer", "bearer", "BEARER", "bEaReR")
        ]

    assert asyncio.run(calls()) == ["alice"] * 4
    assert asyncio.run(authenticator.authenticate("Bearer   good-token")) == "alice"  # 1*SP


def test_an_overlong_token_is_refused_before_it_is_hashed(monkeypatch):
    authenticator = TokenAuth({"alice": hash_token("good-token")})
    hashed: list[object] = []
    monkeypatch.setattr(auth.hashlib, "sha256", lambda data=b"": hashed.append(data) or hashlib.sha256(data))
    failure = refusal(authenticator, "Bearer " + "a" * (auth.MAX_TOKEN_LENGTH + 1))
    assert (failure.status, failure.error) == (401, "invalid_request")
    assert hashed == []


@pytest.mark.parametrize("presented", ["t0", "t7", "t15", "unknown"])
def test_every_stored_hash_is_compared_whatever_matches(monkeypatch, presented):
    authenticator = TokenAuth({f"p{n}": hash_token(f"t{n}") for n in range(16)})
    compared: list[tuple[bytes, bytes]] = []
    original = hmac.compare_digest

    def counting(a, b):
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    if presented == "unknown":
        assert refusal(authenticator, f"Bearer {presented}").error == "invalid_token"
    else:
        assert asyncio.run(authenticator.authenticate(f"Bearer {presented}")) == f"p{presented[1:]}"
    assert len(compared) == 16
    # the presented token hashed once, compared with each stored hash in turn
    assert {a for a, _ in compared} == {hashlib.sha256(presented.encode()).digest()}
    assert [b for _, b in compared] == [hashlib.sha256(f"t{n}".encode()).digest() for n in range(16)]


def test_token_auth_refuses_bad_mappings():
    with pytest.raises(ValueError):
        TokenAuth({})
    with pytest.raises(ValueError):
        TokenAuth({"alice": "abc"})
    with pytest.raises(ValueError):
        TokenAuth({"alice": hash_token("t"), "bob": hash_token("t")})
    with pytest.raises(ValueError):
        TokenAuth({"a:b": hash_token("t")})


# -- RFC 9728 paths ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "paths", "url"),
    [
        (
            "https://gw.example/mcp",
            ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"],
            "https://gw.example/.well-known/oauth-protected-resource/mcp",
        ),
        (
            "https://gw.example:8443/tenant/a/mcp",
            ["/.well-known/oauth-protected-resource/tenant/a/mcp", "/.well-known/oauth-protected-resource"],
            "https://gw.example:8443/.well-known/oauth-protected-resource/tenant/a/mcp",
        ),
        (
            "https://gw.example",
            ["/.well-known/oauth-protected-resource"],
            "https://gw.example/.well-known/oauth-protected-resource",
        ),
        (
            "https://gw.example/",
            ["/.well-known/oauth-protected-resource"],
            "https://gw.example/.well-known/oauth-protected-resource",
        ),
        (
            "http://127.0.0.1:8000/mcp",
            ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"],
            "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp",
        ),
        (
            "https://gw.example/mcp?tenant=a",
            ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"],
            "https://gw.example/.well-known/oauth-protected-resource/mcp?tenant=a",
        ),
    ],
)
def test_metadata_paths_and_url(resource, paths, url):
    assert metadata_paths(resource) == paths
    assert resource_metadata_url(resource) == url


@pytest.mark.parametrize(
    "resource", ["/mcp", "gw.example/mcp", "ftp://gw.example/mcp", "https://gw.example/mcp#x"]
)
def test_metadata_paths_of_a_non_resource_url(resource):
    with pytest.raises(ValueError):
        metadata_paths(resource)


def test_a_token_with_critical_header_extensions_is_refused(keys_file, rsa_a):
    token = jwt.encode(
        {"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "exp": int(time.time()) + 300, "scope": "mcp"},
        rsa_a,
        algorithm="RS256",
        headers={"kid": "a", "crit": ["urn:example:must-understand"], "urn:example:must-understand": True},
    )
    failure = refusal(jwt_auth(keys_file), f"Bearer {token}")
    assert (failure.status, failure.error) == (401, "invalid_token")
    # recent PyJWT refuses an unknown crit while reading the header; the module's own check
    # covers the PyJWT versions that do not
    assert "crit" in failure.description or "well-formed" in failure.description


def test_a_challenge_value_cannot_break_out_of_its_quotes():
    failure = AuthFailure(
        401, "invalid_token", 'a "quoted", back\\slash\r\nX-Injected: 1 and caf\u00e9', scope="a b"
    )
    for authenticator in (TokenAuth({"alice": hash_token("t")}), jwt_auth("/x")):
        params = challenge_of(authenticator, failure)
        assert params["error_description"] == "a quoted, backslashX-Injected: 1 and caf"
        assert params["scope"] == "a b"
        assert (
            "\r" not in authenticator.challenge(failure)[0][1]
            and "\n" not in authenticator.challenge(failure)[0][1]
        )
