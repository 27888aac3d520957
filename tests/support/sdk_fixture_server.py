"""The MCP conformance suite's server surface, served by the official MCP Python SDK alone.

Why it exists: the gateway's transparency test needs an upstream the suite scores well when
reached directly, so that any scenario lost behind ``ssewire gateway`` is the gateway's doing.
The SDK's own conformance server lives in its repository, not in the ``mcp`` package; this is
ours, written on the package's API (``MCPServer``; resources/subscribe, resources/unsubscribe
and logging/setLevel on its low-level server, which MCPServer leaves unwired), one process and
one URL for both revisions the suite scores (2025-11-25 sessions and 2026-07-28 stateless
requests). It also serves the hooks of the suite's pending scenarios (json-schema-2020-12,
server-sse-polling, http-custom-header-server-validation, the listen-stream list changes).
Bounded: 127.0.0.1 only, an event store of the last EVENTS_KEPT events, 64 subscriptions.

The tool, resource and prompt names are the suite's (``@modelcontextprotocol/conformance``).
``fixture_app()`` builds the ASGI app (its lifespan must run: ``lifespan="on"``);
``python -m tests.support.sdk_fixture_server --port N`` serves it on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import warnings
from typing import Annotated, Any

from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    CallToolResult,
    ClientCapabilities,
    Completion,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    SamplingCapability,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from tests.support.sdk_servers import EvictingEventStore

HOST = "127.0.0.1"
PATH = "/mcp"
# a 1x1 red PNG and a 1-sample 8 kHz mono WAV: the smallest media the suite accepts
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = base64.b64encode(
    b"RIFF" + (38).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + (8000).to_bytes(4, "little")
    + (16000).to_bytes(4, "little") + (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
    + b"data" + (2).to_bytes(4, "little") + b"\x00\x00"
).decode()  # fmt: skip
CACHEABLE = ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read")
EVENTS_KEPT = 1000  # the event store's bound (resumption after test_reconnection closes a stream)
RETRY_MS = 500
# the 2020-12 keywords the suite's json-schema-2020-12 scenario looks for in tools/list
SCHEMA_2020_12 = {
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
STATE_MARK = "fixture-state"  # the plaintext the SDK seals into requestState and checks on return


def _text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


def _image() -> ImageContent:
    return ImageContent(type="image", data=PNG, mime_type="image/png")


def _embedded(uri: str, text: str, mime: str = "text/plain") -> EmbeddedResource:
    return EmbeddedResource(
        type="resource", resource=TextResourceContents(uri=uri, mime_type=mime, text=text)
    )


def _ask(message: str, properties: dict[str, Any]) -> ElicitRequest:
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _sample(text: str, max_tokens: int) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content=_text(text))
    return CreateMessageRequest(params=CreateMessageRequestParams(messages=[message], max_tokens=max_tokens))


def _answers(ctx: Context) -> dict[str, Any]:
    return dict(ctx.input_responses or {})


def _content_of(answer: Any) -> dict[str, Any]:
    return dict(answer.content or {}) if isinstance(answer, ElicitResult) else {}


def _sampled_text(answer: Any) -> str:
    content = getattr(answer, "content", None)
    return content.text if isinstance(content, TextContent) else str(content)


def _legacy(call):  # the 2025-11-25 server-to-client requests and logs, deprecated in 2026-07-28
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return call()


def _add_content_tools(server: MCPServer) -> None:
    @server.tool(description="Returns simple text")
    def test_simple_text() -> CallToolResult:
        return CallToolResult(content=[_text("This is a simple text response for testing.")])

    @server.tool(description="Returns an image")
    def test_image_content() -> CallToolResult:
        return CallToolResult(content=[_image()])

    @server.tool(description="Returns audio")
    def test_audio_content() -> CallToolResult:
        return CallToolResult(content=[AudioContent(type="audio", data=WAV, mime_type="audio/wav")])

    @server.tool(description="Returns an embedded resource")
    def test_embedded_resource() -> CallToolResult:
        resource = _embedded("test://embedded-resource", "This is an embedded resource content.")
        return CallToolResult(content=[resource])

    @server.tool(description="Returns text, an image and a resource")
    def test_multiple_content_types() -> CallToolResult:
        resource = _embedded(
            "test://mixed-content-resource", json.dumps({"test": "data", "value": 123}), "application/json"
        )
        return CallToolResult(content=[_text("Multiple content types test:"), _image(), resource])

    @server.tool(description="Always fails")
    def test_error_handling() -> CallToolResult:
        raise RuntimeError("This tool intentionally returns an error for testing")


def _add_session_tools(server: MCPServer) -> None:
    """Tools that talk back on the call's stream: progress, logs, and (2025-11-25) requests."""

    @server.tool(description="Sends three log notifications")
    async def test_tool_with_logging(ctx: Context) -> str:
        for i, text in enumerate(
            ("Tool execution started", "Tool processing data", "Tool execution completed")
        ):
            if i:
                await asyncio.sleep(0.05)
            await _legacy(lambda text=text: ctx.log("info", text))
        return "Logging tool completed"

    @server.tool(description="Reports progress 0, 50, 100 of 100")
    async def test_tool_with_progress(ctx: Context) -> str:
        for i, progress in enumerate((0, 50, 100)):
            if i:
                await asyncio.sleep(0.05)
            await ctx.report_progress(progress, 100)
        return "Progress tool completed"

    @server.tool(description="Asks the client to sample a reply")
    async def test_sampling(ctx: Context, prompt: str) -> CallToolResult | InputRequiredResult:
        answers = await _inputs(ctx, {"sampling": _sample(prompt, 100)})
        if isinstance(answers, InputRequiredResult):
            return answers
        return CallToolResult(content=[_text(f"LLM response: {_sampled_text(answers['sampling'])}")])

    @server.tool(description="Asks the user for a username and email")
    async def test_elicitation(ctx: Context, message: str) -> CallToolResult | InputRequiredResult:
        request = _ask(message, {"username": {"type": "string"}, "email": {"type": "string"}})
        return await _elicited(ctx, request, "User response: ")

    @server.tool(description="Elicits with a default for each primitive type (SEP-1034)")
    async def test_elicitation_sep1034_defaults(ctx: Context) -> CallToolResult | InputRequiredResult:
        properties = {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        }
        request = ElicitRequest(
            params=ElicitRequestFormParams(
                message="Defaults test", requested_schema={"type": "object", "properties": properties}
            )
        )
        return await _elicited(ctx, request, "Elicitation completed: ")

    @server.tool(description="Elicits with the five enum shapes (SEP-1330)")
    async def test_elicitation_sep1330_enums(ctx: Context) -> CallToolResult | InputRequiredResult:
        def titled(prefix: str, titles: tuple[str, ...]) -> list[dict[str, str]]:
            return [{"const": f"value{i}", "title": f"{t} {prefix}"} for i, t in enumerate(titles, 1)]

        options = ["option1", "option2", "option3"]
        properties = {
            "untitledSingle": {"type": "string", "enum": options},
            "titledSingle": {"type": "string", "oneOf": titled("Option", ("First", "Second", "Third"))},
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
            "titledMulti": {
                "type": "array",
                "items": {"anyOf": titled("Choice", ("First", "Second", "Third"))},
            },
        }
        request = ElicitRequest(
            params=ElicitRequestFormParams(
                message="Enums test", requested_schema={"type": "object", "properties": properties}
            )
        )
        return await _elicited(ctx, request, "Elicitation completed: ")


def _modern(ctx: Context) -> bool:
    """The request speaks 2026-07-28 (asks by input-required results), not a session's revision."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


_ANSWER_TYPES: dict[type, type] = {
    ElicitRequest: ElicitResult,
    CreateMessageRequest: CreateMessageResult,
    ListRootsRequest: ListRootsResult,
}


async def _inputs(
    ctx: Context, wanted: dict[str, Any], state: str | None = None
) -> dict[str, Any] | InputRequiredResult:
    """The answers to ``wanted`` (key -> request), each revision asking its own way: under
    2026-07-28 an input-required result (with ``state`` as its requestState) until the retry
    carries every answer and the state; under 2025-11-25 server-to-client requests on the
    call's own stream, all sent at once, their answers awaited."""
    if _modern(ctx):
        answers = _answers(ctx)
        if set(wanted) <= set(answers) and ctx.request_state == state:
            return answers
        return InputRequiredResult(input_requests=wanted, request_state=state)
    related = ServerMessageMetadata(related_request_id=ctx.request_context.request_id)

    async def one(request: Any) -> Any:
        answer_type = _ANSWER_TYPES[type(request)]
        return await _legacy(lambda: ctx.session.send_request(request, answer_type, metadata=related))

    answers = await asyncio.gather(*(one(request) for request in wanted.values()))
    return dict(zip(wanted, answers, strict=True))


async def _elicited(
    ctx: Context, request: ElicitRequest, prefix: str
) -> CallToolResult | InputRequiredResult:
    answers = await _inputs(ctx, {"elicitation": request})
    if isinstance(answers, InputRequiredResult):
        return answers
    result = answers["elicitation"]
    text = f"action={getattr(result, 'action', None)}, content={json.dumps(_content_of(result))}"
    return CallToolResult(content=[_text(prefix + text)])


def _add_input_required_tools(server: MCPServer) -> None:
    """What SEP-2322's scenarios ask for: under 2026-07-28 input-required results (the SDK
    seals and verifies requestState), under 2025-11-25 the same questions as server-to-client
    requests (which a revision bridge turns into input-required results)."""

    @server.tool(description="Asks for a name through an input-required result")
    async def test_input_required_result_elicitation(ctx: Context) -> CallToolResult | InputRequiredResult:
        answers = await _inputs(ctx, {"user_name": _ask("What is your name?", {"name": {"type": "string"}})})
        if isinstance(answers, InputRequiredResult):
            return answers
        name = _content_of(answers["user_name"]).get("name", "stranger")
        return CallToolResult(content=[_text(f"Hello, {name}!")])

    @server.tool(description="Asks the client to sample through an input-required result")
    async def test_input_required_result_sampling(ctx: Context) -> CallToolResult | InputRequiredResult:
        answers = await _inputs(ctx, {"capital_question": _sample("What is the capital of France?", 100)})
        if isinstance(answers, InputRequiredResult):
            return answers
        return CallToolResult(content=[_text(f"Sampled: {_sampled_text(answers['capital_question'])}")])

    @server.tool(description="Asks for the client's roots through an input-required result")
    async def test_input_required_result_list_roots(ctx: Context) -> CallToolResult | InputRequiredResult:
        answers = await _inputs(ctx, {"client_roots": ListRootsRequest()})
        if isinstance(answers, InputRequiredResult):
            return answers
        roots = answers["client_roots"]
        names = [str(r.uri) for r in roots.roots] if isinstance(roots, ListRootsResult) else []
        return CallToolResult(content=[_text(f"Roots: {', '.join(names) or 'none'}")])

    @server.tool(description="Round-trips requestState")
    async def test_input_required_result_request_state(ctx: Context) -> CallToolResult | InputRequiredResult:
        wanted = {"confirm": _ask("Please confirm", {"ok": {"type": "boolean"}})}
        answers = await _inputs(ctx, wanted, STATE_MARK)
        if isinstance(answers, InputRequiredResult):
            return answers
        return CallToolResult(content=[_text("state-ok: the requestState came back intact")])

    @server.tool(description="Asks for three inputs at once")
    async def test_input_required_result_multiple_inputs(
        ctx: Context,
    ) -> CallToolResult | InputRequiredResult:
        wanted = {
            "user_name": _ask("What is your name?", {"name": {"type": "string"}}),
            "greeting": _sample("Generate a greeting", 50),
            "client_roots": ListRootsRequest(),
        }
        answers = await _inputs(ctx, wanted, STATE_MARK)
        if isinstance(answers, InputRequiredResult):
            return answers
        return CallToolResult(content=[_text("All three inputs received")])

    @server.tool(description="Asks in two rounds, the state moving on")
    async def test_input_required_result_multi_round(ctx: Context) -> CallToolResult | InputRequiredResult:
        step1 = _ask("Step 1: What is your name?", {"name": {"type": "string"}})
        step2 = _ask("Step 2: What is your favorite color?", {"color": {"type": "string"}})
        if not _modern(ctx):  # one request after the other on the call's stream
            await _inputs(ctx, {"step1": step1})
            answers = await _inputs(ctx, {"step2": step2})
            assert not isinstance(answers, InputRequiredResult)
            color = _content_of(answers["step2"]).get("color")
            return CallToolResult(content=[_text(f"Done: favorite color {color}")])
        answers, state = _answers(ctx), ctx.request_state
        if state == "round-2" and "step2" in answers:
            color = _content_of(answers["step2"]).get("color")
            return CallToolResult(content=[_text(f"Done: favorite color {color}")])
        if state == "round-2" or (state == "round-1" and "step1" in answers):
            return InputRequiredResult(input_requests={"step2": step2}, request_state="round-2")
        return InputRequiredResult(input_requests={"step1": step1}, request_state="round-1")

    @server.tool(description="Its requestState is sealed: a tampered one is refused")
    async def test_input_required_result_tampered_state(ctx: Context) -> CallToolResult | InputRequiredResult:
        # a tampered token never reaches here: the SDK (or a bridge, for its own) refuses it
        answers = await _inputs(
            ctx, {"confirm": _ask("Please confirm", {"ok": {"type": "boolean"}})}, STATE_MARK
        )
        if isinstance(answers, InputRequiredResult):
            return answers
        return CallToolResult(content=[_text("state verified")])

    @server.tool(description="Asks only for what the client declared it can answer")
    async def test_input_required_result_capabilities(ctx: Context) -> CallToolResult | InputRequiredResult:
        if _modern(ctx) and _answers(ctx):
            return CallToolResult(content=[_text("Inputs received")])
        declared = ctx.client_capabilities or ClientCapabilities()
        wanted: dict[str, Any] = {}
        if declared.sampling is not None:
            wanted["sampling"] = _sample("Say hello", 20)
        if declared.elicitation is not None:
            wanted["elicitation"] = _ask("What is your name?", {"name": {"type": "string"}})
        if declared.roots is not None:
            wanted["roots"] = ListRootsRequest()
        if not wanted:
            return CallToolResult(content=[_text("The client declared nothing to ask")])
        answers = await _inputs(ctx, wanted)
        if isinstance(answers, InputRequiredResult):
            return answers
        return CallToolResult(content=[_text("Inputs received")])

    @server.tool(description="Needs the sampling capability; refuses a client without it")
    def test_missing_capability(ctx: Context) -> str:
        declared = ctx.client_capabilities
        if declared is None or declared.sampling is None:
            required = ClientCapabilities(sampling=SamplingCapability())
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="This tool needs the sampling capability",
                data={
                    "requiredCapabilities": required.model_dump(by_alias=True, mode="json", exclude_none=True)
                },
            )
        return "The client declared sampling"


def _add_diagnostic_tools(server: MCPServer) -> None:
    """The hooks the pending scenarios look for: list mutations, a stream closed mid-call, an
    x-mcp-header parameter (SEP-2243), a 2020-12 inputSchema kept verbatim (SEP-1613)."""

    @server.tool(description="Announces a changed tool list to subscriptions/listen streams")
    async def test_trigger_tool_change(ctx: Context) -> str:
        await ctx.notify_tools_changed()
        return "tools/list_changed sent"

    @server.tool(description="Announces a changed prompt list to subscriptions/listen streams")
    async def test_trigger_prompt_change(ctx: Context) -> str:
        await ctx.notify_prompts_changed()
        return "prompts/list_changed sent"

    @server.tool(description="Closes its own SSE stream mid-call; the client resumes (SEP-1699)")
    async def test_reconnection(ctx: Context) -> str:
        await asyncio.sleep(0.05)
        await ctx.close_sse_stream()
        await asyncio.sleep(0.2)
        return "Reconnection test completed successfully"

    @server.tool(description="Takes its region in the Mcp-Param-Region header too (SEP-2243)")
    def test_header_param(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        return f"region={region}"


def _schema_tool() -> Tool:
    """MCPServer derives a tool's inputSchema from its signature; a Tool given to the
    constructor may carry any schema (calls still validate against the signature)."""

    def json_schema_2020_12_tool() -> str:
        return "ok"

    tool = Tool.from_function(json_schema_2020_12_tool, description="Tool with JSON Schema 2020-12 features")
    return tool.model_copy(update={"parameters": SCHEMA_2020_12})


def _add_resources(server: MCPServer) -> None:
    @server.resource(
        "test://static-text", name="static-text", description="A static text", mime_type="text/plain"
    )
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", name="static-binary", description="A PNG", mime_type="image/png")
    def static_binary() -> bytes:
        return base64.b64decode(PNG)

    @server.resource(
        "test://watched-resource", name="watched", description="To subscribe to", mime_type="text/plain"
    )
    def watched() -> str:
        return "Watched resource content."

    @server.resource(
        "test://template/{id}/data", name="template", description="Data by id", mime_type="application/json"
    )
    def template(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


def _add_prompts(server: MCPServer) -> None:
    @server.prompt(description="A prompt without arguments")
    def test_simple_prompt() -> list[Message]:
        return [UserMessage(content="This is a simple prompt for testing.")]

    @server.prompt(description="A prompt with two arguments")
    def test_prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
        return [UserMessage(content=f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]

    @server.prompt(description="A prompt embedding a resource")
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:  # the suite's argument name
        resource = _embedded(resourceUri, "Embedded resource content for testing.")
        return [
            UserMessage(content=resource),
            UserMessage(content="Please process the embedded resource above."),
        ]

    @server.prompt(description="A prompt with an image")
    def test_prompt_with_image() -> list[Message]:
        return [UserMessage(content=_image()), UserMessage(content="Please analyze the image above.")]

    @server.prompt(description="A prompt that first asks for context")
    async def test_input_required_result_prompt(ctx: Context) -> list[Message] | InputRequiredResult:
        ask = _ask("What context should the prompt use?", {"context": {"type": "string"}})
        answers = await _inputs(ctx, {"user_context": ask})
        if isinstance(answers, InputRequiredResult):
            return answers
        return [
            UserMessage(
                content=f"Use this context: {_content_of(answers['user_context']).get('context', '')}"
            )
        ]

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> Completion:
        values = [v for v in ("paris", "park", "party") if v.startswith(argument.value or "")]
        return Completion(values=values, total=len(values), has_more=False)


def _add_session_methods(server: MCPServer) -> None:
    """2025-11-25's resources/subscribe, resources/unsubscribe and logging/setLevel, which
    MCPServer leaves to the application (the low-level Server takes them by method name)."""
    subscribed: set[str] = set()  # at most 64 URIs (one process serves all clients)

    async def subscribe(ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
        if len(subscribed) < 64:
            subscribed.add(str(params.uri))
        return EmptyResult()

    async def unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
        subscribed.discard(str(params.uri))
        return EmptyResult()

    async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        return EmptyResult()

    lowlevel = server._lowlevel_server  # MCPServer has no public seam for these
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


def fixture_server() -> MCPServer:
    """The MCPServer with the suite's tools, resources, prompts and completion."""
    hints = {method: CacheHint(ttl_ms=0, scope="private") for method in CACHEABLE}
    server = MCPServer(
        "ssewire-sdk-fixture", version="1.0.0", log_level="WARNING", cache_hints=hints, tools=[_schema_tool()]
    )
    _add_content_tools(server)
    _add_session_tools(server)
    _add_input_required_tools(server)
    _add_diagnostic_tools(server)
    _add_resources(server)
    _add_prompts(server)
    _add_session_methods(server)
    return server


def fixture_app() -> Any:
    """The fixture's Streamable HTTP ASGI app at /mcp (run its lifespan). DNS-rebinding
    protection is the SDK's default for a 127.0.0.1 host: other Host/Origin values get 4xx."""
    return fixture_server().streamable_http_app(
        streamable_http_path=PATH,
        host=HOST,
        event_store=EvictingEventStore(EVENTS_KEPT),
        retry_interval=RETRY_MS,
    )


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="the 127.0.0.1 port (0: any free one)")
    port = parser.parse_args(argv).port
    uvicorn.run(fixture_app(), host=HOST, port=port, lifespan="on", log_level="warning")


if __name__ == "__main__":
    main()
