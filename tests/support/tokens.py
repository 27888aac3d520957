"""Credentials for the tests of authenticated servers: static tokens with the `TokenAuth` of
their hashes, an RSA key of a test's own published as a JWKS file, JWTs signed with it
(PyJWT), and RFC 6750 challenges parsed back."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from ssewire.mcp.server.auth import JwtAuth, TokenAuth, hash_token

ISSUER = "https://as.example"
RESOURCE = "https://gw.example/mcp"  # the public URL clients use (the gateway sits behind a proxy)
METADATA_URL = "https://gw.example/.well-known/oauth-protected-resource/mcp"
SCOPE = "mcp"

# principal -> its static token
TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-9876543210"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def as_principal(principal: str) -> dict[str, str]:
    """The Authorization header of ``principal``'s static token."""
    return bearer(TOKENS[principal])


def token_auth() -> TokenAuth:
    return TokenAuth({principal: hash_token(token) for principal, token in TOKENS.items()})


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def write_jwks(path: Path, private_key: rsa.RSAPrivateKey, kid: str = "k1") -> Path:
    """A JWKS file holding the public half of ``private_key`` under ``kid``."""
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private_key.public_key()))
    path.write_text(json.dumps({"keys": [{**public, "kid": kid, "use": "sig", "alg": "RS256"}]}))
    return path


def jwt_auth(jwks: Path, **options: Any) -> JwtAuth:
    settings: dict[str, Any] = {
        "issuer": ISSUER,
        "audience": RESOURCE,
        "resource": RESOURCE,
        "scopes": [SCOPE],
        "leeway": 0,
    }
    settings.update(options)
    return JwtAuth(jwks=str(jwks), **settings)


def sign(private_key: rsa.RSAPrivateKey, kid: str = "k1", **claims: Any) -> str:
    """An access token for ``RESOURCE`` from ``ISSUER``, five minutes valid, scope ``mcp``;
    ``claims`` replace those (None drops one)."""
    now = int(time.time())
    payload: dict[str, Any] = {
        "iss": ISSUER,
        "aud": RESOURCE,
        "sub": "alice",
        "iat": now,
        "exp": now + 300,
        "scope": SCOPE,
    }
    payload.update(claims)
    payload = {name: value for name, value in payload.items() if value is not None}
    return jwt.encode(payload, private_key, algorithm="RS256", headers={"kid": kid})


_PARAM = re.compile(r'([A-Za-z_]+)="([^"\\]*)"')


def challenge(value: str | None) -> dict[str, str]:
    """A ``WWW-Authenticate: Bearer name="value", ...`` header parsed back (RFC 6750
    section 3): exactly that form, each name once."""
    assert value is not None, "no WWW-Authenticate header"
    scheme, _, rest = value.partition(" ")
    assert scheme.lower() == "bearer", value
    pairs = _PARAM.findall(rest)
    assert ", ".join(f'{name}="{text}"' for name, text in pairs) == rest.strip(), value
    params = dict(pairs)
    assert len(params) == len(pairs), f"a parameter given twice: {value}"
    return params
