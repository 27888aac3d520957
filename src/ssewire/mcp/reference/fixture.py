"""The reference server's conformance surface (``ReferenceServer(conformance=True)``,
``ssewire serve --conformance``): the tools, prompts, resources and completions the official
conformance suite calls by name, and the 2026-07-28 stateless side of the same URL.

One server answers both revisions: a request that carries no session id and names a
revision without sessions (or an unknown one) in MCP-Protocol-Version, or asks for
``server/discover``, is a 2026-07-28 request served here on its own (its ``_meta`` carries
what a session would); everything else is the 2025-11-25 session server of ``server.py``,
which calls into this module for the methods and tools below.

The 2026-07-28 side is ``stateless.py``. The data (``TOOLS``, ``PROMPTS``, ...) and the
pure handlers here are shared by both sides; the
streaming tools get a `Channel` (notify the call's stream, ask the client) from the side
that runs them. The header rules and the error-status table are the protocol layer's
(``protocol/headers.py``, ``protocol/bridging.py``), not written again here.

Multi round-trip requests (2026-07-28 input-required results): a round's state travels in
``requestState``, signed with an HMAC key made at each start, so a client cannot forge or
edit it (a tampered one is refused -32602) and a restarted server refuses old ones.

Every peer is hostile: listen streams are counted and each lives at most
``LISTEN_LIFETIME`` seconds with a bounded queue; a requestState or an input response is
refused past its size; a question asked of a client waits ``ASK_TIMEOUT`` at most.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import secrets
import struct
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..protocol.bridging import (
    INPUT_REQUESTS,
    INPUT_REQUIRED,
    INPUT_RESPONSES,
    REQUEST_STATE,
    RESULT_TYPE,
)
from ..protocol.codes import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
)
from ..protocol.handshake import CAPABILITY_OF
from ..protocol.params import ANNOTATION, bindings
from ..protocol.profiles import NEWEST
from ..protocol.requests import notification
from ..protocol.wire import JSON
from .tools import as_object, text_result

MISSING_CAPABILITY = -32021  # 2026-07-28: the request needs a client capability not declared
SUPPORTED = [NEWEST.name]  # what discovery offers: older revisions are negotiated by initialize
CACHE_TTL_MS = 60_000  # the fixture's lists and contents are the same for every client, all run
CACHE_SCOPE = "public"
MAX_LISTENERS = 32  # subscriptions/listen streams open at once; past it -32000 busy
MAX_STREAMED = 64  # 2026-07-28 tool calls answered on a stream at once; past it -32000 busy
LISTEN_LIFETIME = 300.0  # seconds a listen stream lives: a client that never leaves is ended
LISTEN_QUEUE = 64  # notifications waiting for one slow listener; past it the stream ends
MAX_STATE = 4096  # bytes of requestState taken back
ASK_TIMEOUT = 10.0  # seconds a question to the client (2025 sampling, elicitation) may take
STEP_DELAY = 0.05  # seconds between a streaming tool's notifications (the suite asks ~50 ms)
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class CallError(Exception):
    """A JSON-RPC error a handler answers with (code, message, data)."""

    def __init__(self, code: int, text: str, data: Any = None) -> None:
        super().__init__(text)
        self.code, self.text, self.data = code, text, data


# -- content -------------------------------------------------------------------------


def _png() -> str:
    """A 1x1 red PNG, base64 (made here rather than pasted: every byte is accounted for)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    image = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + image).decode()


def _wav() -> str:
    """A tenth of a second of 8 kHz 8-bit mono silence as WAV, base64."""
    samples = b"\x80" * 800
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 8000, 1, 8)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(samples))
    return base64.b64encode(b"RIFF" + struct.pack("<I", len(body) + len(samples)) + body + samples).decode()


PNG = _png()
WAV = _wav()


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image() -> dict[str, Any]:
    return {"type": "image", "data": PNG, "mimeType": "image/png"}


def _resource(uri: str, text: str, mime: str = "text/plain") -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime, "text": text}}


def _tool(name: str, description: str, **properties: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if properties:
        schema["required"] = list(properties)
    return {"name": name, "description": description, "inputSchema": schema}


STATIC_TOOLS: dict[str, dict[str, Any]] = {  # name -> its result, in both revisions
    "test_simple_text": {"content": [_text("This is a simple text response for testing.")]},
    "test_image_content": {"content": [_image()]},
    "test_audio_content": {"content": [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]},
    "test_embedded_resource": {
        "content": [_resource("test://embedded-resource", "This is an embedded resource content.")]
    },
    "test_multiple_content_types": {
        "content": [
            _text("Multiple content types test:"),
            _image(),
            _resource(
                "test://mixed-content-resource",
                json.dumps({"test": "data", "value": 123}),
                JSON,
            ),
        ]
    },
    "test_error_handling": {
        "content": [_text("This tool intentionally returns an error for testing")],
        "isError": True,
    },
    "json_schema_2020_12_tool": {"content": [_text("A tool whose inputSchema uses JSON Schema 2020-12")]},
}
# SEP-1613 and SEP-2106: a 2020-12 inputSchema listed exactly as written, $schema, $defs
# with an $anchor, a $ref, composition (allOf / anyOf), a conditional and additionalProperties
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
INPUT_SCHEMAS = {"json_schema_2020_12_tool": SCHEMA_2020_12}  # static tools listed with a schema of their own
_STRING = {"type": "string"}


def _static_tool(name: str) -> dict[str, Any]:
    tool = _tool(name, f"Conformance: {name.removeprefix('test_').replace('_', ' ')}")
    if name in INPUT_SCHEMAS:
        tool["inputSchema"] = INPUT_SCHEMAS[name]
    return tool


BOTH_TOOLS = [
    *(_static_tool(name) for name in STATIC_TOOLS),
    _tool("test_tool_with_progress", "Conformance: progress 0, 50, 100 of 100 when asked for progress"),
]
SESSION_TOOLS = [  # 2025-11-25: the server asks the client on the call's stream
    *BOTH_TOOLS,
    _tool("test_tool_with_logging", "Conformance: three log messages while it runs"),
    _tool("test_sampling", "Conformance: ask the client to sample", prompt=_STRING),
    _tool("test_elicitation", "Conformance: ask the user", message=_STRING),
    _tool("test_elicitation_sep1034_defaults", "Conformance: elicitation with defaults (SEP-1034)"),
    _tool("test_elicitation_sep1330_enums", "Conformance: elicitation with enums (SEP-1330)"),
    _tool("test_reconnection", "Conformance: closes its connection mid-call; resume the stream (SEP-1699)"),
]
INPUT_KINDS = (
    "elicitation",
    "sampling",
    "list_roots",
    "request_state",
    "multiple_inputs",
    "multi_round",
    "tampered_state",
    "capabilities",
)
MODERN_TOOLS = [  # 2026-07-28: input-required results instead of requests on the stream
    *BOTH_TOOLS,
    *(
        _tool(f"test_input_required_result_{kind}", f"Conformance: input-required result ({kind})")
        for kind in INPUT_KINDS
    ),
    _tool("test_missing_capability", "Conformance: needs the sampling capability (-32021 without it)"),
    _tool("test_streaming_elicitation", "Conformance: an input-required result on a stream"),
    _tool("test_logging_tool", "Conformance: logs only when the request's _meta asks for a level"),
    _tool("test_trigger_tool_change", "Conformance: announce a tools list change to listen streams"),
    _tool("test_trigger_prompt_change", "Conformance: announce a prompts list change to listen streams"),
    _tool(
        "test_header_param",
        "Conformance: its region travels as Mcp-Param-Region too (SEP-2243)",
        region={**_STRING, ANNOTATION: "Region"},
    ),
]
# the tools whose arguments travel as Mcp-Param-* headers too, checked before each call
PARAM_BINDINGS = {tool["name"]: bound for tool in MODERN_TOOLS if (bound := bindings(tool["inputSchema"]))}

PROMPTS = [
    {"name": "test_simple_prompt", "description": "A prompt without arguments"},
    {
        "name": "test_prompt_with_arguments",
        "description": "A prompt with two arguments",
        "arguments": [
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
    },
    {
        "name": "test_prompt_with_embedded_resource",
        "description": "A prompt embedding a resource",
        "arguments": [{"name": "resourceUri", "description": "The resource to embed", "required": True}],
    },
    {"name": "test_prompt_with_image", "description": "A prompt with an image"},
]
INPUT_PROMPT = {"name": "test_input_required_result_prompt", "description": "A prompt that asks for context"}

RESOURCES = [
    {
        "uri": "test://static-text",
        "name": "static-text",
        "description": "A static text resource",
        "mimeType": "text/plain",
    },
    {
        "uri": "test://static-binary",
        "name": "static-binary",
        "description": "A static binary resource (a PNG)",
        "mimeType": "image/png",
    },
    {
        "uri": "test://watched-resource",
        "name": "watched-resource",
        "description": "A resource to subscribe to",
        "mimeType": "text/plain",
    },
]
TEMPLATES = [
    {
        "uriTemplate": "test://template/{id}/data",
        "name": "template-data",
        "description": "Data for an id",
        "mimeType": JSON,
    }
]
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"
COMPLETIONS = {"arg1": ["paris", "park", "party"], "arg2": ["world", "wonder"], "id": ["123", "456"]}


def capabilities(*, modern: bool) -> dict[str, Any]:
    """What the fixture serves; 2026-07-28 has no resources/subscribe (listen instead)."""
    resources: dict[str, Any] = {"listChanged": True} if modern else {"subscribe": True, "listChanged": True}
    return {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": resources,
        "completions": {},
        "logging": {},
    }


# -- the methods both revisions share (pure: params in, result out) ---------------------


def prompts_list(params: dict[str, Any], *, modern: bool) -> dict[str, Any]:
    return {"prompts": [*PROMPTS, INPUT_PROMPT] if modern else PROMPTS}


def prompts_get(params: dict[str, Any]) -> dict[str, Any]:
    name, arguments = params.get("name"), as_object(params.get("arguments"))

    def argument(key: str) -> str:
        value = arguments.get(key)
        if not isinstance(value, str):
            raise CallError(INVALID_PARAMS, f"Invalid params: argument {key} (a string) is required")
        return value

    if name == "test_simple_prompt":
        messages = [_user(_text("This is a simple prompt for testing."))]
    elif name == "test_prompt_with_arguments":
        arg1, arg2 = argument("arg1"), argument("arg2")
        messages = [_user(_text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]
    elif name == "test_prompt_with_embedded_resource":
        uri = argument("resourceUri")
        messages = [
            _user(_resource(uri, "Embedded resource content for testing.")),
            _user(_text("Please process the embedded resource above.")),
        ]
    elif name == "test_prompt_with_image":
        messages = [_user(_image()), _user(_text("Please analyze the image above."))]
    else:
        raise CallError(INVALID_PARAMS, f"Invalid params: unknown prompt {str(name)[:64]!r}")
    return {"messages": messages}


def _user(content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": content}


def resources_list(params: dict[str, Any]) -> dict[str, Any]:
    return {"resources": RESOURCES}


def templates_list(params: dict[str, Any]) -> dict[str, Any]:
    return {"resourceTemplates": TEMPLATES}


def resources_read(params: dict[str, Any]) -> dict[str, Any]:
    uri = params.get("uri")
    if uri == "test://static-text":
        content = {
            "uri": uri,
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }
    elif uri == "test://static-binary":
        content = {"uri": uri, "mimeType": "image/png", "blob": PNG}
    elif uri == "test://watched-resource":
        content = {"uri": uri, "mimeType": "text/plain", "text": "A resource clients may subscribe to."}
    elif isinstance(uri, str) and _template_id(uri) is not None:
        ident = _template_id(uri)
        data = {"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"}
        content = {
            "uri": uri,
            "mimeType": JSON,
            "text": json.dumps(data, separators=(",", ":")),
        }
    else:  # SEP-2164: an error naming the URI, never an empty contents array
        shown = uri[:256] if isinstance(uri, str) else None
        raise CallError(INVALID_PARAMS, "Resource not found", {"uri": shown})
    return {"contents": [content]}


def _template_id(uri: str) -> str | None:
    """The {id} of test://template/{id}/data: one path segment, not empty, short."""
    if not (uri.startswith(TEMPLATE_PREFIX) and uri.endswith(TEMPLATE_SUFFIX)):
        return None
    ident = uri[len(TEMPLATE_PREFIX) : -len(TEMPLATE_SUFFIX)]
    return ident if ident and "/" not in ident and len(ident) <= 128 else None


def subscribe(params: dict[str, Any]) -> dict[str, Any]:
    """resources/subscribe and unsubscribe (2025-11-25): accepted; the fixture's resources never
    change, so there is nothing to track or send (no per-session state a client can grow)."""
    if not isinstance(params.get("uri"), str):
        raise CallError(INVALID_PARAMS, "Invalid params: uri (a string) is required")
    return {}


def complete(params: dict[str, Any]) -> dict[str, Any]:
    argument = as_object(params.get("argument"))
    name, value = argument.get("name"), argument.get("value", "")
    known = COMPLETIONS.get(name, []) if isinstance(name, str) else []
    values = [each for each in known if isinstance(value, str) and each.startswith(value)]
    return {"completion": {"values": values, "total": len(values), "hasMore": False}}


def log_level(value: Any) -> str:
    if value not in LOG_LEVELS:
        raise CallError(INVALID_PARAMS, f"Invalid params: level must be one of {', '.join(LOG_LEVELS)}")
    return str(value)


def logs_at(level: str | None, wanted: str = "info") -> bool:
    """A message at ``wanted`` goes out under ``level`` (none set: the default, everything)."""
    return level is None or LOG_LEVELS.index(wanted) >= LOG_LEVELS.index(level)


# -- tools --------------------------------------------------------------------------


@dataclass
class Channel:
    """What a tool may do beyond returning: notify its call's stream, and under 2025-11-25
    ask the client (``ask`` None under 2026-07-28, which asks by input-required results) and
    close the call's connection while its stream goes on (``close``; None where nothing resumes)."""

    notify: Callable[[dict[str, Any]], Awaitable[None]]
    ask: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]] | None
    client_capabilities: dict[str, Any]
    log_level: str | None  # the session's (setLevel) or the request's _meta (None: not asked, 2026)
    close: Callable[[], None] | None = None


async def progress(params: dict[str, Any], channel: Channel) -> dict[str, Any]:
    token = as_object(params.get("_meta")).get("progressToken")
    for step in (0, 50, 100):
        if token is not None:
            note = {"progressToken": token, "progress": step, "total": 100}
            await channel.notify(notification("notifications/progress", note))
        if step < 100:
            await asyncio.sleep(STEP_DELAY)
    return text_result("Progress tool completed")


async def logging_tool(params: dict[str, Any], channel: Channel, *, modern: bool) -> dict[str, Any]:
    """Three info messages ~50 ms apart; under 2026-07-28 only when the request set a level."""
    sends = channel.log_level is not None if modern else True
    sends = sends and logs_at(channel.log_level)
    for step, text in enumerate(
        ("Tool execution started", "Tool processing data", "Tool execution completed")
    ):
        if step:
            await asyncio.sleep(STEP_DELAY)
        if sends:
            message = {"level": "info", "logger": "conformance", "data": text}
            await channel.notify(notification("notifications/message", message))
    return text_result("Logging tool completed")


async def reconnection(channel: Channel) -> dict[str, Any]:
    """test_reconnection (2025-11-25 polling, SEP-1699): the call's connection is closed
    mid-call, its stream not ended; the result comes after, to the client that resumes it
    with Last-Event-ID."""
    if channel.close is None:
        raise CallError(INTERNAL_ERROR, "this call's stream cannot be resumed")
    await asyncio.sleep(STEP_DELAY)
    channel.close()
    await asyncio.sleep(STEP_DELAY)
    return text_result("Reconnection test completed successfully")


def header_param(params: dict[str, Any]) -> dict[str, Any]:
    """test_header_param: the region it was called with (its header was checked before)."""
    region = as_object(params.get("arguments")).get("region")
    if not isinstance(region, str):
        raise CallError(INVALID_PARAMS, "Invalid params: region (a string) is required")
    return text_result(f"region={region[:256]}")


def _require(channel: Channel, capability: str) -> None:
    if capability not in channel.client_capabilities:
        raise CallError(
            MISSING_CAPABILITY,
            f"The client did not declare the {capability} capability",
            {"requiredCapabilities": {capability: {}}},
        )


async def _ask(channel: Channel, method: str, request: dict[str, Any], capability: str) -> dict[str, Any]:
    _require(channel, capability)
    if channel.ask is None:
        raise CallError(INTERNAL_ERROR, "no stream to ask the client on")
    answer = await channel.ask(method, request)
    if "error" in answer:
        raise CallError(INTERNAL_ERROR, f"the client refused {method}: {json.dumps(answer['error'])[:200]}")
    return as_object(answer.get("result"))


async def sampling_tool(params: dict[str, Any], channel: Channel) -> dict[str, Any]:
    prompt = str(as_object(params.get("arguments")).get("prompt", ""))[:4096]
    request = {"messages": [_user(_text(prompt))], "maxTokens": 100}
    result = await _ask(channel, "sampling/createMessage", request, "sampling")
    text = as_object(result.get("content")).get("text", "")
    return text_result(f"LLM response: {str(text)[:4096]}")


async def elicitation_tool(name: str, params: dict[str, Any], channel: Channel) -> dict[str, Any]:
    if name == "test_elicitation":
        message = str(as_object(params.get("arguments")).get("message", ""))[:4096]
        request = {"message": message, "requestedSchema": ELICIT_USER}
        result = await _ask(channel, "elicitation/create", request, "elicitation")
        return text_result(f"User response: {_elicited(result)}")
    schema = ELICIT_DEFAULTS if name == "test_elicitation_sep1034_defaults" else ELICIT_ENUMS
    request = {"message": "Please review and update the form fields", "requestedSchema": schema}
    result = await _ask(channel, "elicitation/create", request, "elicitation")
    return text_result(f"Elicitation completed: {_elicited(result)}")


def _elicited(result: dict[str, Any]) -> str:
    return f"action={str(result.get('action'))[:16]}, content={json.dumps(result.get('content', {}))[:2048]}"


ELICIT_USER = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}
ELICIT_DEFAULTS = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
}
_OPTIONS = ["option1", "option2", "option3"]
ELICIT_ENUMS = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": _OPTIONS},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": _OPTIONS}},
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


# -- input-required results (2026-07-28) ------------------------------------------------


def _elicit(message: str, field_name: str, kind: str = "string") -> dict[str, Any]:
    schema = {"type": "object", "properties": {field_name: {"type": kind}}, "required": [field_name]}
    return {"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}}


def _sample(text: str, tokens: int) -> dict[str, Any]:
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [_user(_text(text))], "maxTokens": tokens},
    }


ROOTS = {"method": "roots/list", "params": {}}


class StateSigner:
    """requestState as ``base64url(JSON).base64url(HMAC-SHA256)`` under a key made at start:
    the client carries the state, but cannot make or change one."""

    def __init__(self, key: bytes | None = None) -> None:
        self.key = key or secrets.token_bytes(32)

    def sign(self, state: dict[str, Any]) -> str:
        payload = base64.urlsafe_b64encode(json.dumps(state, separators=(",", ":")).encode()).decode()
        return f"{payload}.{self._mac(payload)}"

    def verify(self, token: Any) -> dict[str, Any]:
        """The state ``token`` carries, or CallError -32602 for one this server did not sign."""
        if not isinstance(token, str) or len(token) > MAX_STATE or token.count(".") != 1:
            raise CallError(INVALID_PARAMS, "Invalid params: requestState failed its integrity check")
        payload, mac = token.split(".")
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise CallError(INVALID_PARAMS, "Invalid params: requestState failed its integrity check")
        try:
            state = json.loads(base64.urlsafe_b64decode(payload))
        except (binascii.Error, ValueError):
            raise CallError(INVALID_PARAMS, "Invalid params: requestState is unreadable") from None
        return as_object(state)

    def _mac(self, payload: str) -> str:
        digest = hmac.new(self.key, payload.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


@dataclass
class Turn:
    """One round of a multi round-trip request, read: the client's answers by key (each an
    object, invalid ones refused), the verified state (None when none came back), and how
    to ask again (``ask``: an input-required result, its state signed for this request)."""

    name: str  # the tool or prompt: a state signed for one is refused by every other
    responses: dict[str, dict[str, Any]]
    state: dict[str, Any] | None
    channel: Channel
    signer: StateSigner

    @classmethod
    def of(cls, name: str, params: dict[str, Any], channel: Channel, signer: StateSigner) -> Turn:
        raw = params.get(INPUT_RESPONSES, {})
        if not isinstance(raw, dict) or not all(isinstance(each, dict) for each in raw.values()):
            raise CallError(INVALID_PARAMS, "Invalid params: inputResponses must map keys to result objects")
        if len(raw) > 64:  # more answers than any question here has keys: refused, not read
            raise CallError(INVALID_PARAMS, "Invalid params: too many inputResponses")
        state = None
        if REQUEST_STATE in params:
            state = signer.verify(params[REQUEST_STATE])
            if state.get("for") != name:
                raise CallError(INVALID_PARAMS, "Invalid params: requestState belongs to another request")
        return cls(name, raw, state, channel, signer)

    def answered(self, *keys: str) -> bool:
        return all(key in self.responses for key in keys)

    def ask(self, requests: dict[str, dict[str, Any]], state: dict[str, Any] | None = None) -> dict[str, Any]:
        """An input-required result; only what the client declared it can answer (-32021)."""
        for request in requests.values():
            _require(self.channel, CAPABILITY_OF[request["method"]])
        result: dict[str, Any] = {RESULT_TYPE: INPUT_REQUIRED, INPUT_REQUESTS: requests}
        if state is not None:
            result[REQUEST_STATE] = self.signer.sign({**state, "for": self.name})
        return result


def _content(answer: dict[str, Any], key: str) -> str:
    return str(as_object(answer.get("content")).get(key, ""))[:1024]


def _sampled(answer: dict[str, Any]) -> str:
    return str(as_object(answer.get("content")).get("text", ""))[:1024]


def _roots(answer: dict[str, Any]) -> str:
    roots = answer.get("roots")
    uris = [str(as_object(root).get("uri"))[:256] for root in roots[:16]] if isinstance(roots, list) else []
    return ", ".join(uris) or "none"


# the test_input_required_result_* tools, each a small handler of one turn: missing or wrong
# keys are asked for again (not an error), extra keys are ignored


def _ask_name(turn: Turn) -> dict[str, Any]:
    if not turn.answered("user_name"):
        return turn.ask({"user_name": _elicit("What is your name?", "name")})
    return text_result(f"Hello, {_content(turn.responses['user_name'], 'name')}!")


def _ask_capital(turn: Turn) -> dict[str, Any]:
    if not turn.answered("capital_question"):
        return turn.ask({"capital_question": _sample("What is the capital of France?", 100)})
    return text_result(f"The model said: {_sampled(turn.responses['capital_question'])}")


def _ask_roots(turn: Turn) -> dict[str, Any]:
    if not turn.answered("client_roots"):
        return turn.ask({"client_roots": ROOTS})
    return text_result(f"Client roots: {_roots(turn.responses['client_roots'])}")


def _ask_confirmation(turn: Turn) -> dict[str, Any]:
    """request_state and tampered_state: done only with the answer and the signed state."""
    if turn.state is None or not turn.answered("confirm"):
        return turn.ask({"confirm": _elicit("Please confirm", "ok", "boolean")}, {"round": 1})
    return text_result("state-ok: the requestState came back as this server signed it")


def _ask_three(turn: Turn) -> dict[str, Any]:
    asks = {
        "user_name": _elicit("What is your name?", "name"),
        "greeting": _sample("Generate a greeting", 50),
        "client_roots": ROOTS,
    }
    if turn.state is None or not turn.answered(*asks):
        missing = {key: ask for key, ask in asks.items() if key not in turn.responses} or asks
        return turn.ask(missing, {"round": 1})
    got = turn.responses
    return text_result(
        f"{_sampled(got['greeting'])} {_content(got['user_name'], 'name')} (roots: {_roots(got['client_roots'])})"
    )


def _ask_twice(turn: Turn) -> dict[str, Any]:
    """multi_round: the name, then the colour, the name carried in the signed state."""
    state = turn.state or {}
    color = {"step2": _elicit("Step 2: What is your favorite color?", "color")}
    if state.get("round") == 2:
        if not turn.answered("step2"):
            return turn.ask(color, state)
        return text_result(
            f"{state.get('name')}'s favorite color is {_content(turn.responses['step2'], 'color')}"
        )
    if state.get("round") == 1 and turn.answered("step1"):
        return turn.ask(color, {"round": 2, "name": _content(turn.responses["step1"], "name")})
    return turn.ask({"step1": _elicit("Step 1: What is your name?", "name")}, {"round": 1})


def _ask_what_was_declared(turn: Turn) -> dict[str, Any]:
    asks = {"user_name": _elicit("What is your name?", "name"), "greeting": _sample("Say hello", 50)}
    declared = {
        key: ask
        for key, ask in asks.items()
        if CAPABILITY_OF[ask["method"]] in turn.channel.client_capabilities
    }
    if not declared:
        _require(turn.channel, "sampling")  # neither: -32021 naming one it could use
    if not turn.answered(*declared):
        return turn.ask(declared)
    return text_result(f"Answered: {', '.join(sorted(declared))}")


def _ask_sample(turn: Turn) -> dict[str, Any]:
    """test_missing_capability: needs sampling, so -32021 for a client without it."""
    if not turn.answered("sample"):
        return turn.ask({"sample": _sample("Say hello", 20)})
    return text_result(f"Sampled: {_sampled(turn.responses['sample'])}")


def ask_on_stream(turn: Turn) -> dict[str, Any]:
    """test_streaming_elicitation: the question is the stream's result, never a request."""
    if not turn.answered("answer"):
        return turn.ask({"answer": _elicit("Your answer?", "answer")})
    return text_result(f"Answered: {_content(turn.responses['answer'], 'answer')}")


def ask_context(turn: Turn) -> dict[str, Any]:
    """The prompt test_input_required_result_prompt: input-required on prompts/get too."""
    if not turn.answered("user_context"):
        return turn.ask({"user_context": _elicit("What context should the prompt use?", "context")})
    context = _content(turn.responses["user_context"], "context")
    return {"messages": [_user(_text(f"Answer with this context in mind: {context}"))]}


INPUT_TOOLS: dict[str, Callable[[Turn], dict[str, Any]]] = {
    "test_input_required_result_elicitation": _ask_name,
    "test_input_required_result_sampling": _ask_capital,
    "test_input_required_result_list_roots": _ask_roots,
    "test_input_required_result_request_state": _ask_confirmation,
    "test_input_required_result_multiple_inputs": _ask_three,
    "test_input_required_result_multi_round": _ask_twice,
    "test_input_required_result_tampered_state": _ask_confirmation,
    "test_input_required_result_capabilities": _ask_what_was_declared,
    "test_missing_capability": _ask_sample,
}


# -- the 2026-07-28 side: one request, one answer -------------------------------------
