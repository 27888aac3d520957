"""Who is calling: the downstream authentication of the reference server and the gateway.

A protected MCP server is an OAuth 2.1 resource server (MCP authorization, revision
2025-11-25): a request carries ``Authorization: Bearer <token>`` (RFC 6750), a refused one
is answered 401 (or 403 for too little scope) with a ``WWW-Authenticate: Bearer`` challenge
(RFC 6750 section 3), and the challenge of a 401 points at the server's protected resource
metadata (RFC 9728), the document from which a client learns which authorization server
to ask for a token.

Two modes, one interface (`Authenticator`):

- `TokenAuth`: static tokens, kept only as SHA-256 hashes (a file of ``principal:<hex>``
  lines, made by ``ssewire hash-token``);
- `JwtAuth`: JWT access tokens issued by an authorization server, checked against its
  JWKS (signature, issuer, audience, lifetime, scopes).

Nothing here puts a token, a hash of one, or a claim's value (beyond the scope names the
spec puts in a challenge) in an exception, a description or a log line. PyJWT and httpx
are imported only by `JwtAuth` (the ``auth`` extra), so `TokenAuth` needs neither.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from ..protocol.wire import JSON

if TYPE_CHECKING:
    import httpx

__all__ = [
    "AuthFailure",
    "Authenticator",
    "JwtAuth",
    "TokenAuth",
    "hash_token",
    "metadata_paths",
    "resource_metadata_url",
    "token_line",
]

log = logging.getLogger(__name__)

WELL_KNOWN = "/.well-known/oauth-protected-resource"  # RFC 9728 section 3
MAX_TOKEN_LENGTH = 16 * 1024  # a longer credential is refused before it is hashed or parsed
MAX_JWKS_BYTES = 1024 * 1024
JWKS_TIMEOUT = 10.0  # seconds for a whole JWKS fetch, connection to last byte

# RFC 6750 section 2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
# RFC 7235 credentials: an auth-scheme (a token), then one or more spaces and its parameters
_CREDENTIALS = re.compile(r"([!#$%&'*+.^_`|~0-9A-Za-z-]+)(?: +(.*))?")
_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")
# RFC 6749 section 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


class AuthFailure(Exception):
    """A request that is not let in, with what its challenge says.

    ``status`` is 401 (no usable credentials) or 403 (a valid token with too little scope).
    ``error`` is RFC 6750's code (``invalid_request``, ``invalid_token``,
    ``insufficient_scope``), or None when the request carried no credentials at all (RFC
    6750 section 3.1: then the challenge names no error). ``description`` is safe to show
    the client and to log: it never holds token material. ``scope`` is the space-separated
    scopes the resource needs, when it needs any.
    """

    def __init__(self, status: int, error: str | None, description: str, *, scope: str | None = None) -> None:
        super().__init__(description)
        self.status, self.error, self.description, self.scope = status, error, description, scope


class Authenticator(Protocol):
    """What a server asks of its authentication: who the caller is, how to refuse, and
    the metadata document to serve (one interface, so the servers hold no mode of their own)."""

    async def authenticate(self, authorization: str | None) -> str:
        """The principal named by the ``Authorization`` header's value (None: no header);
        `AuthFailure` when the request is not let in."""
        ...

    def challenge(self, failure: AuthFailure) -> list[tuple[str, str]]:
        """The headers of the answer to ``failure`` (its ``www-authenticate``)."""
        ...

    def metadata(self) -> dict[str, Any] | None:
        """The RFC 9728 protected resource metadata, or None when this mode has none."""
        ...


# -- the Authorization header and the challenge (RFC 6750) ---------------------------------------


def bearer_token(authorization: str | None) -> str:
    """The token of ``Authorization: Bearer <token>``; `AuthFailure` (401) otherwise.

    A missing or blank header is no credentials (a failure with no error code, RFC 6750
    section 3.1); another scheme or a token that is not RFC 6750's ``b64token`` is
    ``invalid_request``. The scheme is matched case-insensitively (RFC 7235 section 2.1).
    """
    if authorization is None or not authorization.strip(" \t"):
        raise AuthFailure(401, None, "this resource needs a bearer token")
    credentials = _CREDENTIALS.fullmatch(authorization.strip(" \t"))
    if credentials is None or credentials.group(1).lower() != "bearer":
        raise AuthFailure(401, "invalid_request", "the Authorization header must use the Bearer scheme")
    token = credentials.group(2) or ""
    if len(token) > MAX_TOKEN_LENGTH:
        raise AuthFailure(401, "invalid_request", "the bearer token is too long")
    if not _B64TOKEN.fullmatch(token):
        raise AuthFailure(
            401, "invalid_request", "the Authorization header holds no well-formed bearer token"
        )
    return token


def _quoted(value: str) -> str:
    """``value`` as an RFC 9110 quoted-string, keeping only the characters RFC 6750 allows
    in its attributes (printable ASCII without ``"`` and ``\\``), so no value can break out
    of its quotes or the header."""
    return '"' + "".join(c for c in value if " " <= c <= "~" and c not in '"\\') + '"'


def _challenge(first: tuple[str, str], failure: AuthFailure) -> list[tuple[str, str]]:
    """``Bearer <first>, error=..., error_description=..., scope=...``: the error fields only
    when the request carried credentials (RFC 6750 section 3.1)."""
    params = [first]
    if failure.error is not None:
        params += [("error", failure.error), ("error_description", failure.description)]
    if failure.scope:
        params.append(("scope", failure.scope))
    return [("www-authenticate", "Bearer " + ", ".join(f"{name}={_quoted(value)}" for name, value in params))]


# -- protected resource metadata (RFC 9728) ------------------------------------------------------


def _resource_parts(resource: str) -> tuple[str, str, str, str]:
    if any(not "!" <= c <= "~" or c in '"\\' for c in resource):
        raise ValueError("the resource must be a URL of printable ASCII without quotes or spaces")
    parts = urlsplit(resource)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise ValueError(f"the resource must be an absolute http(s) URL: {resource!r}")
    if parts.fragment or "#" in resource:
        raise ValueError("the resource must have no fragment (RFC 9728 section 1.2)")
    return parts.scheme, parts.netloc, parts.path, parts.query


def metadata_paths(resource: str) -> list[str]:
    """The paths the metadata of ``resource`` is served at, the one clients try first, first.

    RFC 9728 section 3.1 inserts the well-known path between the host and the resource's
    path (``https://gw.example/mcp`` -> ``/.well-known/oauth-protected-resource/mcp``); MCP
    clients fall back to the bare well-known path, so that is served too. A resource at
    the root of its host has the bare path only (the slash after the host is dropped).
    """
    path = _resource_parts(resource)[2]
    if path in ("", "/"):
        return [WELL_KNOWN]
    return [WELL_KNOWN + path, WELL_KNOWN]


def resource_metadata_url(resource: str) -> str:
    """The absolute URL of ``resource``'s metadata (the first of `metadata_paths`), for the
    ``resource_metadata`` of a challenge (RFC 9728 section 5.1)."""
    scheme, netloc, _, query = _resource_parts(resource)
    return f"{scheme}://{netloc}{metadata_paths(resource)[0]}" + (f"?{query}" if query else "")


# -- static tokens ------------------------------------------------------------------------------


def hash_token(token: str) -> str:
    """The SHA-256 of ``token`` (UTF-8), in lower-case hex: what a token file keeps."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _valid_principal(principal: str) -> bool:
    return bool(principal) and principal.isprintable() and not any(c.isspace() or c == ":" for c in principal)


def _check_principal(principal: str) -> None:
    if not _valid_principal(principal):
        raise ValueError("a principal must be a non-empty name without ':' or whitespace")


def token_line(principal: str, token: str) -> str:
    """The token file line of ``principal`` with ``token``: ``principal:<sha256 hex>``.

    ValueError for a principal that is empty or holds ``:`` or whitespace, and for a token
    that could never arrive in a Bearer header (not an RFC 6750 ``b64token``).
    """
    _check_principal(principal)
    if len(token) > MAX_TOKEN_LENGTH or not _B64TOKEN.fullmatch(token):
        raise ValueError(
            "a token must be bearer token characters (letters, digits, - . _ ~ + / and a trailing =)"
        )
    return f"{principal}:{hash_token(token)}"


class TokenAuth:
    """Static bearer tokens, each naming a principal, kept only as SHA-256 hashes.

    For an operator without an authorization server: a leaked token file gives away no
    token (tokens are random, so an unsalted fast hash is enough). A presented token is
    hashed once and compared, in constant time, with every stored hash, with no early exit,
    so the time taken tells neither which entry matched nor whether one did.

    :param hashes: principal -> SHA-256 hex of its token (see `from_file`).
    """

    def __init__(self, hashes: Mapping[str, str]) -> None:
        if not hashes:
            raise ValueError("no tokens")
        seen: set[str] = set()
        self._entries: list[tuple[bytes, str]] = []
        for principal, digest in hashes.items():
            _check_principal(principal)
            if not _SHA256_HEX.fullmatch(digest):
                raise ValueError(f"the hash of {principal!r} is not 64 hex digits")
            if digest.lower() in seen:
                raise ValueError(f"the hash of {principal!r} is another principal's too")
            seen.add(digest.lower())
            self._entries.append((bytes.fromhex(digest), principal))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> TokenAuth:
        """Read a token file: one ``principal:<sha256 hex>`` a line, ``#`` comment lines and
        blank lines allowed. ValueError naming the file and the line for a line of another
        form (its text is not repeated: it may be a token), a principal or a hash given
        twice, or a file with no tokens; OSError when it cannot be read."""
        with open(path, "rb") as handle:
            data = handle.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{os.fspath(path)}: not UTF-8 text") from None
        hashes: dict[str, str] = {}
        principal_line: dict[str, int] = {}
        hash_line: dict[str, int] = {}
        for number, raw in enumerate(text.split("\n"), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            where = f"{os.fspath(path)}, line {number}"
            principal, _, digest = line.partition(":")
            if not _valid_principal(principal) or not _SHA256_HEX.fullmatch(digest):
                raise ValueError(f"{where}: not a 'principal:<sha256 hex>' line")
            digest = digest.lower()
            if principal in principal_line:
                raise ValueError(
                    f"{where}: principal {principal!r} again (first on line {principal_line[principal]})"
                )
            if digest in hash_line:
                raise ValueError(f"{where}: the same token hash as line {hash_line[digest]}")
            principal_line[principal], hash_line[digest] = number, number
            hashes[principal] = digest
        if not hashes:
            raise ValueError(f"{os.fspath(path)}: no tokens (expected 'principal:<sha256 hex>' lines)")
        return cls(hashes)

    @property
    def principals(self) -> list[str]:
        return [principal for _, principal in self._entries]

    async def authenticate(self, authorization: str | None) -> str:
        presented = hashlib.sha256(bearer_token(authorization).encode("ascii")).digest()
        found: str | None = None
        for digest, principal in self._entries:  # every entry, whatever matched before
            if hmac.compare_digest(presented, digest):
                found = principal
        if found is None:
            raise AuthFailure(401, "invalid_token", "the bearer token is not known")
        return found

    def challenge(self, failure: AuthFailure) -> list[tuple[str, str]]:
        # No resource_metadata: static tokens come from the operator, not from an
        # authorization server, so there is no RFC 9728 document to point a client at (one
        # without authorization_servers would only send clients looking for an OAuth flow
        # that does not exist). A realm names what is protected instead (RFC 6750 section 3).
        return _challenge(("realm", "ssewire"), failure)

    def metadata(self) -> dict[str, Any] | None:
        return None


# -- JWT access tokens -------------------------------------------------------------------------

# The algorithms accepted, each with the key type (and curves) it must be used with. Only
# asymmetric ones: "none" is no signature, and an HMAC "secret" here would be the public
# key anyone can fetch (the classic RS256 -> HS256 confusion).
ALGORITHMS: dict[str, tuple[str, frozenset[str] | None]] = {
    "RS256": ("RSA", None),
    "RS384": ("RSA", None),
    "RS512": ("RSA", None),
    "PS256": ("RSA", None),
    "ES256": ("EC", frozenset({"P-256"})),
    "ES384": ("EC", frozenset({"P-384"})),
    "EdDSA": ("OKP", frozenset({"Ed25519", "Ed448"})),
}
# the algorithm a key of a type (and curve) is parsed with when its JWK names none
_DEFAULT_ALG = {
    ("RSA", None): "RS256",
    ("EC", "P-256"): "ES256",
    ("EC", "P-384"): "ES384",
    ("OKP", "Ed25519"): "EdDSA",
    ("OKP", "Ed448"): "EdDSA",
}


class _KeysUnavailable(Exception):
    """The JWKS could not be read or held no usable key (the text is safe to log)."""


@dataclass(frozen=True)
class _Key:
    kid: str | None
    alg: str | None  # what the JWK pins, if it does
    kty: str
    crv: str | None
    key: Any  # the cryptography public key

    def fits(self, alg: str) -> bool:
        kty, curves = ALGORITHMS[alg]
        return self.alg in (None, alg) and self.kty == kty and (curves is None or self.crv in curves)


def _parse_key(jwk: Any) -> _Key | None:
    """One JWK as a verification key, or None (logged by its kid) when it is not one this
    server may use: not for signatures, symmetric, private, of an algorithm not accepted,
    or with an ``alg`` that does not fit its ``kty``."""
    import jwt

    if not isinstance(jwk, dict):
        return None
    kid = jwk.get("kid") if isinstance(jwk.get("kid"), str) else None
    kty, crv, alg = jwk.get("kty"), jwk.get("crv"), jwk.get("alg")
    key_ops = jwk.get("key_ops")
    if jwk.get("use", "sig") != "sig" or (isinstance(key_ops, list) and "verify" not in key_ops):
        return None  # an encryption key
    if "d" in jwk or kty not in ("RSA", "EC", "OKP"):
        log.warning("JWKS key %r skipped: not a public signing key", kid)
        return None
    parse_alg = alg if alg is not None else _DEFAULT_ALG.get((kty, None if kty == "RSA" else crv))
    if parse_alg not in ALGORITHMS:
        log.warning("JWKS key %r skipped: its algorithm is not accepted", kid)
        return None
    key = _Key(kid, alg, kty, crv if isinstance(crv, str) else None, None)
    if not key.fits(parse_alg):
        log.warning("JWKS key %r skipped: its alg does not fit its kty / crv", kid)
        return None
    try:
        return replace(key, key=jwt.PyJWK(jwk, algorithm=parse_alg).key)
    except (jwt.PyJWTError, ValueError, TypeError, KeyError):
        log.warning("JWKS key %r skipped: it does not parse", kid)
        return None


def _source_name(source: str) -> str:
    """A JWKS source as a log line may show it: a URL without credentials or query."""
    if source.startswith(("http://", "https://")):
        parts = urlsplit(source)
        return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"
    return source


def _failure_of(exc: Exception) -> str:
    """A PyJWT refusal as a description (PyJWT's own texts are not passed on)."""
    import jwt

    if isinstance(exc, jwt.ExpiredSignatureError):
        return "the token has expired"
    if isinstance(exc, jwt.ImmatureSignatureError):
        return "the token is not valid yet"
    if isinstance(exc, jwt.InvalidAudienceError):
        return "the token is not meant for this resource (aud)"
    if isinstance(exc, jwt.InvalidIssuerError):
        return "the token is from another issuer (iss)"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"the token has no {exc.claim} claim"
    if isinstance(exc, jwt.InvalidSignatureError):
        return "the token's signature does not verify"
    if isinstance(exc, jwt.DecodeError):
        return "the token is not a well-formed JWT"
    return "the token is not valid"


class JwtAuth:
    """OAuth 2.1 resource-server mode: JWT access tokens, checked against the authorization
    server's published keys (JWKS).

    For deployments with an authorization server: the server never sees a user's
    credentials, only short-lived tokens it can check offline. A token is let in when its
    signature verifies with a key of the JWKS (an asymmetric algorithm that fits the key,
    never ``none`` or HMAC; a token's own ``jku`` / ``jwk`` / ``x5u`` headers are ignored,
    keys come only from ``jwks``), ``iss`` is ``issuer``, ``aud`` is or holds ``audience``
    (MCP: tokens issued for this server only), ``exp`` is present and not past and ``nbf``
    not ahead (both with ``leeway`` seconds), and ``sub`` is present. The principal is
    ``sub`` as it is: the one issuer makes it unique. Then every scope of ``scopes`` must be
    granted (the ``scope`` claim, space-separated, or an ``scp`` list), else 403
    ``insufficient_scope``.

    Keys: read at first use from a file or fetched from an http(s) URL (at most 1 MiB, in
    at most 10 s), and cached. A token whose ``kid`` is not among them makes the set be
    read again, at most once per ``refresh_interval`` seconds, so a flood of made-up kids
    cannot make this server fetch in a loop; a set older than ``max_age`` is read again on
    the next request, so a key the issuer withdraws stops being accepted. A read that fails
    keeps the keys held (if any) and is logged; with no keys, requests are refused (401,
    "keys are unavailable"), never answered 500.

    :param jwks: a JWKS file's path, or an http(s) URL.
    :param resource: this server's canonical URL (``https://gw.example/mcp``), the
        ``resource`` of its metadata.
    :param authorization_servers: the issuer identifiers of its metadata; ``(issuer,)``
        when none is given (MCP requires at least one).
    :param scopes: the scopes every request needs; also the metadata's ``scopes_supported``
        and the ``scope`` of every challenge (MCP: a 401 says which scopes to ask for).
    :param http: the client to fetch a JWKS URL with (by default one made per fetch).
    :param clock: monotonic seconds, for the refresh limits (replaceable in tests).
    """

    def __init__(
        self,
        *,
        jwks: str,
        issuer: str,
        audience: str,
        resource: str,
        authorization_servers: Sequence[str] = (),
        scopes: Sequence[str] = (),
        leeway: float = 30.0,
        refresh_interval: float = 30.0,
        max_age: float = 3600.0,
        http: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        import jwt  # noqa: F401  (PyJWT missing fails here, at start-up, not at the first request)

        if not jwks or not issuer or not audience:
            raise ValueError("jwks, issuer and audience must each be given")
        _resource_parts(resource)  # ValueError for a URL that cannot be a resource identifier
        if isinstance(scopes, str) or not all(_SCOPE_TOKEN.fullmatch(scope) for scope in scopes):
            raise ValueError("scopes must be a sequence of scope names (RFC 6749 scope-tokens)")
        if not leeway >= 0 or not refresh_interval > 0 or not max_age > 0:  # NaN too
            raise ValueError("leeway must be >= 0 s, refresh_interval and max_age > 0 s")
        self.jwks, self.issuer, self.audience, self.resource = jwks, issuer, audience, resource
        self.authorization_servers = list(authorization_servers) or [issuer]
        self.scopes = list(scopes)
        self.leeway, self.refresh_interval, self.max_age = leeway, refresh_interval, max_age
        self._http, self._clock = http, clock
        self._keys: list[_Key] | None = None
        self._loaded_at = 0.0
        self._tried_at: float | None = None  # the last read, successful or not
        self._lock = asyncio.Lock()

    # -- the challenge and the metadata --

    def challenge(self, failure: AuthFailure) -> list[tuple[str, str]]:
        return _challenge(("resource_metadata", resource_metadata_url(self.resource)), failure)

    def metadata(self) -> dict[str, Any] | None:
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
        }
        if self.scopes:
            document["scopes_supported"] = self.scopes
        document["bearer_methods_supported"] = ["header"]
        return document

    # -- authenticate --

    def _fail(self, description: str, error: str | None = "invalid_token") -> AuthFailure:
        return AuthFailure(401, error, description, scope=" ".join(self.scopes) or None)

    async def authenticate(self, authorization: str | None) -> str:
        import jwt

        try:
            token = bearer_token(authorization)
        except AuthFailure as failure:
            raise self._fail(failure.description, failure.error) from None
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise self._fail("the token is not a well-formed JWT") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in ALGORITHMS:
            raise self._fail("the token's algorithm is not accepted (asymmetric signatures only)")
        if "crit" in header:
            raise self._fail("the token needs header extensions this server does not know (crit)")
        if kid is not None and not isinstance(kid, str):
            raise self._fail("the token's kid is not a string")
        key = await self._key_for(kid, alg)
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise self._fail(_failure_of(exc)) from None
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject or not subject.isprintable():
            raise self._fail("the token's sub claim is not a usable name")
        missing = [scope for scope in self.scopes if scope not in granted_scopes(claims)]
        if missing:
            raise AuthFailure(
                403,
                "insufficient_scope",
                "the token lacks a scope this resource needs",
                scope=" ".join(self.scopes),
            )
        return Principal(subject, claims)

    async def _key_for(self, kid: str | None, alg: str) -> _Key:
        """The key to verify a token of ``kid`` and ``alg`` with, reading the JWKS first
        when none is held, the set is older than ``max_age``, or ``kid`` is unknown (each
        within the refresh limit)."""
        keys = self._keys  # a token of a key held needs no lock: a refresh never holds it up
        fresh = keys is not None and self._clock() - self._loaded_at < self.max_age
        known = [key for key in keys if kid is None or key.kid == kid] if keys is not None and fresh else []
        if not known:
            async with self._lock:
                if self._keys is None or self._clock() - self._loaded_at >= self.max_age:
                    await self._refresh()
                if self._keys is None:
                    raise self._fail("the server's signing keys are unavailable; try again later")
                known = [key for key in self._keys if kid is None or key.kid == kid]
                if not known:
                    await self._refresh()
                    known = [key for key in self._keys if kid is None or key.kid == kid]
        if not known:
            raise self._fail("the token's signing key (kid) is not known")
        fitting = [key for key in known if key.fits(alg)]
        if not fitting:
            raise self._fail("the token's algorithm does not fit its key")
        if len(fitting) > 1:
            raise self._fail("the token's key is ambiguous: it names no kid, or one the key set repeats")
        return fitting[0]

    async def _refresh(self) -> None:
        """Read the JWKS, unless it was tried less than ``refresh_interval`` ago; a failure
        keeps the keys held and is logged (without the URL's query or credentials)."""
        now = self._clock()
        if self._tried_at is not None and now - self._tried_at < self.refresh_interval:
            return
        self._tried_at = now
        try:
            data = await asyncio.wait_for(self._read(), JWKS_TIMEOUT)
            keys = _parse_jwks(data)
        except Exception as exc:  # whatever the source did: a 401 for the caller, never a 500
            reason = str(exc) if isinstance(exc, _KeysUnavailable) else type(exc).__name__
            log.warning("JWKS from %s unavailable: %s", _source_name(self.jwks), reason)
            return
        self._keys, self._loaded_at = keys, now

    async def _read(self) -> bytes:
        if not self.jwks.startswith(("http://", "https://")):
            return await asyncio.to_thread(_read_file, self.jwks)
        if self._http is not None:
            return await _fetch(self._http, self.jwks)
        import httpx

        async with httpx.AsyncClient(timeout=JWKS_TIMEOUT) as client:
            return await _fetch(client, self.jwks)


class Principal(str):
    """A principal's name and what its token said of it (a JWT's claims). It is equal to
    its name and hashes as it, so what is keyed by principal (sessions bound to it, quotas)
    is unchanged; the tool rules read its claims and scopes."""

    claims: Mapping[str, Any]

    def __new__(cls, name: str, claims: Mapping[str, Any] | None = None) -> Principal:
        principal = super().__new__(cls, name)
        principal.claims = dict(claims or {})
        return principal

    @property
    def scopes(self) -> set[str]:
        return granted_scopes(self.claims)


def granted_scopes(claims: Mapping[str, Any]) -> set[str]:
    """The scopes a token grants: its ``scope`` claim (RFC 9068 / RFC 8693, space-separated)
    or, as some issuers write it, an ``scp`` list (or string)."""
    granted: set[str] = set()
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            granted.update(value.split())
        elif isinstance(value, list):
            granted.update(item for item in value if isinstance(item, str))
    return granted


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_JWKS_BYTES + 1)
    except OSError as exc:
        raise _KeysUnavailable(f"cannot read it: {exc.strerror or type(exc).__name__}") from None
    if len(data) > MAX_JWKS_BYTES:
        raise _KeysUnavailable(f"larger than {MAX_JWKS_BYTES} bytes")
    return data


async def _fetch(client: httpx.AsyncClient, url: str) -> bytes:
    async with client.stream("GET", url, headers={"accept": JSON}, timeout=JWKS_TIMEOUT) as response:
        if response.status_code != 200:
            raise _KeysUnavailable(f"HTTP status {response.status_code}")
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > MAX_JWKS_BYTES:
            raise _KeysUnavailable(f"larger than {MAX_JWKS_BYTES} bytes")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_JWKS_BYTES:
                raise _KeysUnavailable(f"larger than {MAX_JWKS_BYTES} bytes")
    return bytes(body)


def _parse_jwks(data: bytes) -> list[_Key]:
    try:
        document = json.loads(data)
    except ValueError:
        raise _KeysUnavailable("not JSON") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise _KeysUnavailable("not a JWK set (no 'keys' list)")
    keys = [key for key in map(_parse_key, document["keys"]) if key is not None]
    if not keys:
        raise _KeysUnavailable("no usable signing key")
    return keys
