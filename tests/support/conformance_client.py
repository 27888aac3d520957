"""The client the official MCP conformance suite drives: a small program on ssewire's
`Client`, run as ``python -m tests.support.conformance_client URL``.

The suite starts a scenario's server, then this program with the server's URL as the last
argument; ``MCP_CONFORMANCE_SCENARIO`` names the scenario, ``MCP_CONFORMANCE_PROTOCOL_VERSION``
the revision it runs at, ``MCP_CONFORMANCE_CONTEXT`` (JSON) what the scenario hands the
client (the calls to make, pre-registered OAuth credentials). What a scenario checks is the
client's behaviour on the wire, so this program does what an ordinary application does:
connect (the revision negotiated), list the tools and call each, answer the server's
requests through handlers; the ``auth/*`` scenarios pass the official SDK's OAuth client
provider (an ``httpx2.Auth``) to ``Client(auth=...)`` as it is.

Every wait is bounded (`DEADLINE`, and the suite stops a client at its own); the exit status is 0
when the session ran, 1 otherwise (with the error on stderr)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from ssewire.mcp.client import Client

# seconds for the whole run: under the 60 s per scenario tests/support/conformance.py gives the
# suite (its default is 30 s); the auth scenarios start all at once, and a loaded machine is slow
DEADLINE = float(os.environ.get("SSEWIRE_CONFORMANCE_DEADLINE", "55"))
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


async def run(url: str, scenario: str, context: dict[str, Any]) -> None:
    auth = None
    if scenario.startswith("auth/"):
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
