"""The client the official MCP conformance suite drives: a small program on ssewire's
`Client`, run as ``python -m tests.support.conformance_client URL``.

The suite starts a scenario's server, then this program with the server's URL as the last
argument; ``MCP_CONFORMANCE_SCENARIO`` names the scenario, ``MCP_CONFORMANCE_PROTOCOL_VERSION``
the revision it runs at, ``MCP_CONFORMANCE_CONTEXT`` (JSON) what the scenario hands the
client (the calls to make, pre-registered OAuth credentials). What a scenario checks is the
client's behaviour on the wire, so this program does what an ordinary application does:
connect (the revision negotiated), list the tools and call each, answer the server's
requests through handlers; the ``auth/*`` scenarios pass the official SDK's OAuth client
provider (an ``httpx2.Auth``) to ``Client(auth=...)`` as it is. Under
``SSEWIRE_CONFORMANCE_AUTH=authlib`` they use authlib's OAuth 2 client instead (`AuthlibMCP`):
authlib makes every OAuth request, a few plain functions do MCP's discovery and registration.

Every wait is bounded (`DEADLINE`, and the suite stops a client at its own); the exit status is 0
when the session ran, 1 otherwise (with the error on stderr)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2

from ssewire.mcp.client import Client

# seconds for the whole run: under the 60 s per scenario tests/support/conformance.py gives the
# suite (its default is 30 s); the auth scenarios start all at once, and a loaded machine is slow
DEADLINE = float(os.environ.get("SSEWIRE_CONFORMANCE_DEADLINE", "55"))
# what a run imports as it goes, imported once by a fork server (tests/support/forkserver.py)
PRELOAD = (
    "ssewire.mcp.transport.h1",
    "mcp.client.auth",
    "mcp.client.auth.extensions.client_credentials",
    "mcp.shared.auth",
    "authlib.integrations.httpx_client",
    "authlib.oauth2.rfc7523",
    "authlib.oauth2.rfc8414",
    "joserfc.jwk",
)
REDIRECT_URI = "http://localhost:3030/callback"  # never listened on: the redirect is read, not followed
CIMD_URL = "https://conformance-test.local/client-metadata.json"  # the scenarios' client metadata URL

log = logging.getLogger("conformance_client")


def example(schema: Any) -> Any:
    """A value for a JSON Schema property: its default, its first enum member, or one of its type."""
    if not isinstance(schema, dict):
        return "x"
    if "default" in schema:
        return schema["default"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return arguments_for(schema)
    return {"integer": 1, "number": 1, "boolean": True, "array": [], "null": None}.get(kind, "x")  # type: ignore[arg-type]


def arguments_for(schema: Any) -> dict[str, Any]:
    """Arguments for a tool's inputSchema: every required property given an example value."""
    if not isinstance(schema, dict):
        return {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    return {name: example(properties.get(name)) for name in required if isinstance(name, str)}


def accept_with_defaults(params: dict[str, Any]) -> dict[str, Any]:
    """An elicitation answered as a user who accepts every default (SEP-1034)."""
    schema = params.get("requestedSchema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    content: dict[str, Any] = {}
    for name, prop in (properties or {}).items():
        if isinstance(prop, dict) and "default" in prop:
            content[name] = prop["default"]
        elif isinstance(prop, dict) and prop.get("type") == "boolean":
            content[name] = True
    return {"action": "accept", "content": content}


def sample(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "conformance"}


HANDLERS = {
    "elicitation/create": accept_with_defaults,
    "sampling/createMessage": sample,
    "roots/list": lambda params: {"roots": []},
}


class MemoryStorage:
    """The SDK's TokenStorage in memory (one run)."""

    def __init__(self, client_info: Any = None) -> None:
        self.tokens: Any = None
        self.client_info = client_info

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


def oauth_provider(url: str, context: dict[str, Any]) -> Any:
    """The official SDK's OAuth client provider, headless: the authorization URL is
    fetched and the code read from the redirect it answers with (the scenarios' authorization
    servers approve at once)."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata

    redirected: dict[str, str | None] = {}

    async def redirect_handler(authorization_url: str) -> None:
        async with httpx.AsyncClient(timeout=10.0, follow_redirects=False) as http:
            answer = await http.get(authorization_url)
        location = answer.headers.get("location")
        if location is None:
            raise RuntimeError(f"the authorization endpoint answered {answer.status_code}, no redirect")
        query = parse_qs(urlsplit(location).query)
        for name in ("code", "state", "iss"):
            redirected[name] = query[name][0] if name in query else None

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(
            code=redirected.get("code") or "", state=redirected.get("state"), iss=redirected.get("iss")
        )

    metadata = OAuthClientMetadata(
        client_name="ssewire conformance client",
        redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    registered = None
    if context.get("client_id"):  # pre-registered credentials the scenario hands over
        registered = OAuthClientInformationFull(
            client_id=context["client_id"],
            client_secret=context.get("client_secret"),
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="client_secret_basic" if context.get("client_secret") else "none",
        )
    return OAuthClientProvider(
        server_url=url,
        client_metadata=metadata,
        storage=MemoryStorage(registered),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=CIMD_URL,
    )


def client_credentials(url: str, scenario: str, context: dict[str, Any]) -> Any:
    """The SDK's providers of the client-credentials grant (an extension: machine to machine,
    no user), for the scenarios that hand over a secret or a signing key; None for others."""
    from mcp.client.auth.extensions.client_credentials import (
        ClientCredentialsOAuthProvider,
        PrivateKeyJWTOAuthProvider,
        SignedJWTParameters,
    )

    if scenario == "auth/client-credentials-basic":
        return ClientCredentialsOAuthProvider(
            url, MemoryStorage(), context["client_id"], context["client_secret"]
        )
    if scenario == "auth/client-credentials-jwt":
        signer = SignedJWTParameters(
            issuer=context["client_id"],
            subject=context["client_id"],
            signing_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm", "ES256"),
        )
        return PrivateKeyJWTOAuthProvider(
            url, MemoryStorage(), context["client_id"], signer.create_assertion_provider()
        )
    return None


# --- SSEWIRE_CONFORMANCE_AUTH=authlib: the same scenarios with authlib's httpx integration ---
#
# authlib does the OAuth: the authorization URL with PKCE S256 and state
# (AsyncOAuth2Client.create_authorization_url), the code exchange with the state checked
# (fetch_token(authorization_response=...)), client authentication at the token endpoint
# (client_secret_basic, client_secret_post, none), the refresh grant (refresh_token), the
# Bearer header (OAuth2Auth); every HTTP request below goes through its client. What authlib
# has no client side for is MCP's part, done in the plain functions that follow: finding the
# authorization server (RFC 9728, then RFC 8414 / OIDC discovery, with authlib's
# rfc8414.get_well_known_url), registering (RFC 7591: authlib has only the server's endpoint),
# the resource indicator (RFC 8707) and the scope to ask for (from the challenge). One check
# here is OAuth's, not MCP's, and authlib's client lacks it: the RFC 9207 iss comparison
# (`check_issuer`); the scenarios of 2026-07-28 require it.

CHALLENGE_PARAM = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')
MAX_AUTHORIZATIONS = 3  # a request: a server that keeps refusing the scopes it asked for is not asked forever


def challenge(response: Any) -> dict[str, str]:
    """The parameters of a Bearer challenge (WWW-Authenticate), e.g. resource_metadata, scope, error."""
    header = response.headers.get("www-authenticate", "")
    return {m[1].lower(): m[2] if m[2] is not None else m[3] for m in CHALLENGE_PARAM.finditer(header)}


async def fetch_json(http: Any, url: str) -> dict[str, Any] | None:
    answer = await http.request("GET", url, headers={"Accept": "application/json"}, withhold_token=True)
    if answer.status_code != 200:
        return None
    data = answer.json()
    return data if isinstance(data, dict) else None


async def protected_resource(http: Any, url: str, metadata_url: str | None) -> dict[str, Any]:
    """RFC 9728 metadata: at the challenge's resource_metadata, else at the well-known URL
    for the server's path, else at the root's; its resource must be the server's (§3.3)."""
    from authlib.oauth2.rfc8414 import get_well_known_url

    root = f"{urlsplit(url).scheme}://{urlsplit(url).netloc}/.well-known/oauth-protected-resource"
    candidates = [metadata_url] if metadata_url else []
    candidates += [get_well_known_url(url, external=True, suffix="oauth-protected-resource"), root]
    for candidate in dict.fromkeys(candidates):
        metadata = await fetch_json(http, candidate)
        if metadata is not None:
            resource = metadata.get("resource")
            if not isinstance(resource, str) or not (
                url == resource or url.startswith(resource.rstrip("/") + "/")
            ):
                raise RuntimeError(f"the protected resource metadata names {resource!r}, not {url}")
            return metadata
    raise RuntimeError(f"no protected resource metadata for {url}")


async def authorization_server(http: Any, issuer: str) -> dict[str, Any]:
    """RFC 8414 metadata (or OpenID Connect's) of ``issuer``, in the order MCP gives; its
    issuer must be the one the well-known URL was built from (RFC 8414 §3.3)."""
    from authlib.oauth2.rfc8414 import get_well_known_url

    candidates = [
        get_well_known_url(issuer, external=True),
        get_well_known_url(issuer, external=True, suffix="openid-configuration"),
    ]
    if urlsplit(issuer).path.strip("/"):
        candidates.append(issuer.rstrip("/") + "/.well-known/openid-configuration")
    for candidate in candidates:
        metadata = await fetch_json(http, candidate)
        if metadata is not None:
            if metadata.get("issuer") != issuer:
                raise RuntimeError(f"the metadata of {issuer} names the issuer {metadata.get('issuer')!r}")
            return metadata
    raise RuntimeError(f"no authorization server metadata for {issuer}")


def scopes_to_ask(
    challenged: dict[str, str], resource: dict[str, Any], server: dict[str, Any], asked: set[str]
) -> str | None:
    """MCP's scope selection: the challenge's scope, else the resource's scopes_supported,
    else none; what was asked before kept (step-up); offline_access when the server lists it."""
    wanted = set((challenged.get("scope") or "").split())
    if not wanted and isinstance(resource.get("scopes_supported"), list):
        wanted = set(resource["scopes_supported"])
    wanted |= asked
    if wanted and "offline_access" in (server.get("scopes_supported") or []):
        wanted.add("offline_access")
    return " ".join(sorted(wanted)) or None


def auth_method(server: dict[str, Any], secret: str | None) -> str:
    """The token endpoint authentication to use: none for a public client, else the first of
    basic and post the server supports (basic when it lists none, its default)."""
    if not secret:
        return "none"
    supported = server.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    return next((m for m in ("client_secret_basic", "client_secret_post") if m in supported), supported[0])


async def client_identity(http: Any, server: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    """The client at ``server``: pre-registered (the scenario's), its metadata URL when the
    server takes one (CIMD), else registered (RFC 7591: a JSON POST authlib has no client for)."""
    if context.get("client_id"):
        secret = context.get("client_secret")
        return {
            "client_id": context["client_id"],
            "client_secret": secret,
            "method": auth_method(server, secret),
        }
    if server.get("client_id_metadata_document_supported"):
        return {"client_id": CIMD_URL, "client_secret": None, "method": "none"}
    endpoint = server.get("registration_endpoint")
    if not endpoint:
        raise RuntimeError(f"{server.get('issuer')} takes no registration and no client metadata URL")
    answer = await http.request(
        "POST",
        endpoint,
        withhold_token=True,
        json={
            "client_name": "ssewire conformance client (authlib)",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "application_type": "native",  # a program on the user's machine, its redirect to localhost
            "token_endpoint_auth_method": auth_method(server, "if confidential"),
        },
    )
    answer.raise_for_status()
    registered = answer.json()
    secret = registered.get("client_secret")
    method = registered.get("token_endpoint_auth_method") or auth_method(server, secret)
    return {"client_id": registered["client_id"], "client_secret": secret, "method": method}


def check_issuer(location: str, server: dict[str, Any]) -> None:
    """RFC 9207: an iss in the authorization response is the issuer, compared as a string;
    missing only where the server said it sends it. (authlib's client does not check it.)"""
    iss = parse_qs(urlsplit(location).query).get("iss")
    if iss is not None and iss[0] != server["issuer"]:
        raise RuntimeError(f"the authorization response came from {iss[0]!r}, not {server['issuer']!r}")
    if iss is None and server.get("authorization_response_iss_parameter_supported"):
        raise RuntimeError("the authorization response lacks the iss its server said it sends")


class AuthlibMCP(httpx2.Auth):
    """authlib's OAuth 2 client with MCP's discovery in front: a 401 (or a 403
    insufficient_scope) finds the authorization server from the resource's metadata, the
    client registers there (once an issuer), and authlib authorizes (code with PKCE, the
    headless user fetching the URL) and exchanges the code; the token goes on as authlib's
    OAuth2Auth. An expired token is refreshed by authlib."""

    requires_response_body = False

    def __init__(self, url: str, context: dict[str, Any], machine: bool = False) -> None:
        self.url = url
        self.context = context
        self.machine = machine  # the client-credentials grant (no user): the scenario's credentials
        self.token: Any = None
        self.clients: dict[str, dict[str, Any]] = {}  # issuer -> the client there (never another's)
        self.asked: set[str] = set()
        self.server: dict[str, Any] = {}
        self.resource: str = url

    def _oauth(self, client: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        from authlib.integrations.httpx_client import AsyncOAuth2Client

        client = client or {}
        return AsyncOAuth2Client(
            client_id=client.get("client_id"),
            client_secret=client.get("client_secret"),
            token_endpoint_auth_method=client.get("method"),
            redirect_uri=REDIRECT_URI,
            code_challenge_method="S256",
            timeout=10.0,
            **kwargs,
        )

    async def async_auth_flow(self, request: Any) -> Any:
        from authlib.integrations.httpx_client import OAuth2Auth

        if self.token is not None and self.token.is_expired() and self.token.get("refresh_token"):
            await self._refresh()
        authorizations = 0
        while True:
            if self.token is not None:  # authlib's header on the request itself, so its answer streams
                signed = next(OAuth2Auth(self.token).auth_flow(request))
                request.headers["Authorization"] = signed.headers["Authorization"]
            response = yield request
            challenged = challenge(response)
            stepping_up = response.status_code == 403 and challenged.get("error") == "insufficient_scope"
            if response.status_code != 401 and not stepping_up:
                return
            if authorizations >= MAX_AUTHORIZATIONS:
                return  # the client reports the refusal (Unauthorized)
            authorizations += 1
            await self._authorize(challenged)

    async def _authorize(self, challenged: dict[str, str]) -> None:
        async with self._oauth() as http:
            resource = await protected_resource(http, self.url, challenged.get("resource_metadata"))
            issuer = (resource.get("authorization_servers") or [None])[0]
            if not isinstance(issuer, str):
                raise RuntimeError("the protected resource metadata names no authorization server")
            server = await authorization_server(http, issuer)
            if issuer not in self.clients and not self.machine:
                self.clients[issuer] = await client_identity(http, server, self.context)
        self.server, self.resource = server, resource["resource"]
        scope = scopes_to_ask(challenged, resource, server, self.asked)
        self.asked |= set((scope or "").split())
        if self.machine:
            await self._client_credentials(server, scope)
            return
        from authlib.common.security import generate_token

        verifier = generate_token(48)
        async with self._oauth(self.clients[issuer], scope=scope) as oauth:
            url, state = oauth.create_authorization_url(
                server["authorization_endpoint"], code_verifier=verifier, resource=self.resource
            )
            answer = await oauth.request(
                "GET", url, follow_redirects=False, withhold_token=True
            )  # the user approving at once
            location = answer.headers.get("location")
            if location is None:
                raise RuntimeError(f"the authorization endpoint answered {answer.status_code}, no redirect")
            check_issuer(location, server)
            self.token = await oauth.fetch_token(
                server["token_endpoint"],
                authorization_response=location,
                state=state,
                code_verifier=verifier,
                resource=self.resource,
            )

    async def _client_credentials(self, server: dict[str, Any], scope: str | None) -> None:
        """The client-credentials grant, the client authenticated by its secret or by a JWT
        signed with its key (authlib's PrivateKeyJWT, the audience the issuer)."""
        from authlib.oauth2.rfc7523 import PrivateKeyJWT
        from joserfc import jwk  # authlib's JOSE library: PrivateKeyJWT reads a PEM as RSA only

        alg = self.context.get("signing_algorithm", "ES256")
        pem = self.context.get("private_key_pem")
        key_type = {"ES": "EC", "RS": "RSA", "PS": "RSA", "Ed": "OKP"}.get(alg[:2], "RSA")
        key = jwk.import_key(pem, key_type) if pem else None  # type: ignore[arg-type]
        secret = self.context.get("client_secret")
        client = {
            "client_id": self.context["client_id"],
            "client_secret": key or secret,
            "method": "private_key_jwt" if key else auth_method(server, secret),
        }
        self.clients[server["issuer"]] = client
        async with self._oauth(client, scope=scope) as oauth:
            if key:
                oauth.register_client_auth_method(PrivateKeyJWT(server["issuer"], alg=alg))
            self.token = await oauth.fetch_token(
                server["token_endpoint"], grant_type="client_credentials", resource=self.resource
            )

    async def _refresh(self) -> None:
        client = self.clients.get(self.server.get("issuer", ""))
        async with self._oauth(client, token=self.token) as oauth:
            self.token = await oauth.refresh_token(self.server["token_endpoint"], resource=self.resource)


async def run(url: str, scenario: str, context: dict[str, Any]) -> None:
    auth = None
    if scenario.startswith("auth/") and os.environ.get("SSEWIRE_CONFORMANCE_AUTH") == "authlib":
        os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")  # the scenarios' servers: http on localhost
        auth = AuthlibMCP(url, context, machine=scenario.startswith("auth/client-credentials-"))
    elif scenario.startswith("auth/"):
        auth = client_credentials(url, scenario, context) or oauth_provider(url, context)
    # an answer's head waits for the whole OAuth flow (idle_timeout): as long as the run may take
    async with Client(url, handlers=HANDLERS, auth=auth, timeout=DEADLINE, idle_timeout=DEADLINE) as client:
        tools = await client.list_tools()
        if scenario == "http-custom-headers":
            for call in context.get("toolCalls", []):
                await client.call_tool(call["name"], call.get("arguments") or {})
            return
        if scenario == "json-schema-2020-12-preservation":  # the schemas come back as listed
            echo = [tool for tool in tools if tool["name"] == "json_schema_echo"]
            for tool in tools if echo else []:
                if tool is not echo[0]:
                    await client.call_tool("json_schema_echo", {"schema": tool.get("inputSchema")})
            return
        for tool in tools:
            if scenario == "json-schema-ref-no-deref":
                break  # listing is what it checks: the schema is kept, its network $ref never fetched
            await client.call_tool(tool["name"], arguments_for(tool.get("inputSchema")))
        if scenario == "http-standard-headers":
            listed = await client.request("resources/list")
            for resource in listed.get("resources", []):
                await client.request("resources/read", {"uri": resource["uri"]})
            listed = await client.request("prompts/list")
            for prompt in listed.get("prompts", []):
                await client.request("prompts/get", {"name": prompt["name"], "arguments": {}})


def main(argv: list[str]) -> int:
    global DEADLINE  # (read at each run: a fork server imported this module once, for many)
    DEADLINE = float(os.environ.get("SSEWIRE_CONFORMANCE_DEADLINE", "55"))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    url = argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    try:
        asyncio.run(asyncio.wait_for(run(url, scenario, context), DEADLINE))
    except Exception as exc:  # the suite reads stderr and the status
        print(f"{scenario}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
