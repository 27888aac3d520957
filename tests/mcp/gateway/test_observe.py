"""The gateway's logs and traces (ssewire.mcp.gateway.observe): JSON and text lines, what
they never hold, session hashes, rate-limited notices, W3C trace context in and out, span
events from the upstream client's transport events, and all of it without OpenTelemetry."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import sys
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from ssewire.mcp.client import Client
from ssewire.mcp.gateway import observe
from ssewire.mcp.gateway.observe import Telemetry, configure_logging, session_hash
from ssewire.mcp.transport.serving import running
from tests.support.faultproxy import Cut, fault_proxy
from tests.support.resets import answers_a_tool_call, no_keepalive_httpx, reference_server

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
TOKEN = "sk-live-0123456789abcdefSECRET"
PAYLOAD = "PAYLOAD-the-tool-arguments-7f3a"
SID = "5e551d0000000000deadbeefcafe0001"
RFC3339_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


@pytest.fixture
def lines(capsys):
    """Configure the ssewire logger as the command line does; the lines written to stderr."""
    root = logging.getLogger("ssewire")
    level = root.level

    def read() -> list[str]:
        return [line for line in capsys.readouterr().err.splitlines() if line]

    yield read
    for handler in [h for h in root.handlers if h.name == observe._HANDLER]:
        root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def records(found: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in found]


def access(found: list[str]) -> list[dict[str, Any]]:
    return [r for r in records(found) if r["logger"] == observe.ACCESS]


# -- log lines ---------------------------------------------------------------------------


def test_json_access_line_carries_the_fields_and_nothing_secret(lines):
    configure_logging("json")
    telemetry = Telemetry("search", key=b"k" * 32)
    headers = {"authorization": f"Bearer {TOKEN}", "cookie": f"s={TOKEN}", "x-payload": PAYLOAD}
    with telemetry.request("POST", headers) as trace:
        trace.note(mcp_method="tools/call", session=SID)
        trace.note(status=200, outcome="ok")
        telemetry.transport_event("reset", {"request": 7, "attempt": 1})
        telemetry.transport_event("resumption", {"request": 7, "attempt": 1})
    found = lines()
    text = "\n".join(found)
    for secret in (TOKEN, PAYLOAD, SID):
        assert secret not in text
    [line] = access(found)
    assert RFC3339_MS.fullmatch(line["time"])
    assert line["level"] == "info" and line["logger"] == "ssewire.mcp.gateway.access"
    assert line["message"] == "POST tools/call 200 ok"
    assert {k: line[k] for k in ("route", "http_method", "mcp_method", "status", "outcome")} == {
        "route": "search",
        "http_method": "POST",
        "mcp_method": "tools/call",
        "status": 200,
        "outcome": "ok",
    }
    assert line["resets"] == 1 and line["resumptions"] == 1
    assert line["session"] == session_hash(SID, b"k" * 32)
    assert isinstance(line["duration_ms"], float) and 0 <= line["duration_ms"] < 5000
    # the reset was also a notice, on the gateway's logger, with the session's hash only
    [notice] = [r for r in records(found) if r["logger"] == observe.NOTICES]
    assert notice["kind"] == "reset" and notice["route"] == "search"
    assert notice["session"] == line["session"]


def test_a_method_or_outcome_that_is_not_a_name_is_logged_as_other(lines):
    configure_logging("json")
    with Telemetry("default").request("POST", {}) as trace:
        trace.note(mcp_method=f'{{"arguments": "{PAYLOAD}"}}', outcome=TOKEN + " " * 70)
    [line] = access(lines())
    assert line["mcp_method"] == "other" and line["outcome"] == "other"


def test_note_refuses_fields_it_does_not_know():
    with Telemetry("default").request("POST", {}) as trace, pytest.raises(TypeError):
        trace.note(arguments={"q": PAYLOAD})


def test_an_exception_is_logged_as_its_class_name_never_its_text(lines):
    configure_logging("json")
    try:
        raise RuntimeError(f"connect to http://up/mcp?token={TOKEN} failed")
    except RuntimeError:
        logging.getLogger("ssewire.mcp.gateway").exception("relaying failed")
    configure_logging("text")
    try:
        raise ValueError(TOKEN)
    except ValueError:
        logging.getLogger("ssewire.mcp.client").exception("a callback raised")
    found = lines()
    assert TOKEN not in "\n".join(found) and "Traceback" not in "\n".join(found)
    first = json.loads(found[0])
    assert first["error"] == "RuntimeError" and first["message"] == "relaying failed"
    assert found[1].endswith("ssewire.mcp.client: a callback raised error=ValueError")


def test_text_lines_and_configure_logging_is_idempotent(lines):
    configure_logging("json")
    configure_logging("text", logging.INFO)
    configure_logging("text", logging.INFO)
    root = logging.getLogger("ssewire")
    assert [h.name for h in root.handlers].count(observe._HANDLER) == 1
    with Telemetry("default").request("GET", {}) as trace:
        trace.note(status=404)
    logging.getLogger("ssewire.mcp.gateway").debug("below the level")
    [line] = lines()  # one handler: one line, and nothing below info
    head, _, pairs = line.partition(": ")
    assert RFC3339_MS.fullmatch(head.split()[0])
    assert head.split()[1:] == ["INFO", "ssewire.mcp.gateway.access"]
    assert pairs.startswith("GET - 404 refused ")
    assert "route=default" in pairs and "status=404" in pairs and "outcome=refused" in pairs
    assert "session=null" in pairs and "resets=0" in pairs


def test_with_the_access_log_off_no_access_line_is_written_and_the_other_lines_are(lines):
    configure_logging("json", access=False)
    telemetry = Telemetry("default")
    with telemetry.request("POST", {}) as trace:
        trace.note(status=200)
    assert telemetry.notice("reset", "an upstream stream broke")
    assert [r["logger"] for r in records(lines())] == ["ssewire.mcp.gateway"]
    configure_logging("json")  # on again
    with telemetry.request("POST", {}) as trace:
        trace.note(status=200)
    assert len(access(lines())) == 1


def test_an_unknown_log_format_is_refused():
    with pytest.raises(ValueError, match="text or json"):
        configure_logging("xml")


def test_outcomes_follow_the_status_a_failure_and_a_cancellation(lines):
    configure_logging("json")
    telemetry = Telemetry("default")
    with telemetry.request("POST", {}) as trace:
        trace.note(status=503)
    with pytest.raises(KeyError), telemetry.request("POST", {}):
        raise KeyError(TOKEN)

    async def cancelled() -> None:
        with telemetry.request("GET", {}):
            await asyncio.sleep(10)

    async def main() -> None:
        task = asyncio.ensure_future(cancelled())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    outcomes = [line["outcome"] for line in access(lines())]
    assert outcomes == ["failed", "failed", "cancelled"]


def test_sending_notes_the_status_of_the_response_started():
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def main() -> observe.Trace:
        with Telemetry("default").request("POST", {}) as trace:
            watched = trace.sending(send)
            await watched({"type": "http.response.start", "status": 202, "headers": []})
            await watched({"type": "http.response.body", "body": b""})
        return trace

    trace = asyncio.run(main())
    assert trace.status == 202 and len(sent) == 2


# -- session hashes ----------------------------------------------------------------------


def test_session_hash_is_a_keyed_short_hmac():
    key = b"\x01" * 32
    expected = hmac.new(key, SID.encode(), hashlib.sha256).hexdigest()[:12]
    assert session_hash(SID, key) == expected
    assert re.fullmatch(r"[0-9a-f]{12}", session_hash(SID))
    assert session_hash(SID) == session_hash(SID)  # one process key
    assert session_hash(SID) != session_hash(SID, key)  # the process key is not a fixed one
    assert session_hash(SID, b"\x02" * 32) != expected
    assert session_hash(SID + "x", key) != expected
    # without a key given, a plain SHA-256 of the id (which anyone can compute) is not it
    assert session_hash(SID) != hashlib.sha256(SID.encode()).hexdigest()[:12]


# -- notices -----------------------------------------------------------------------------


def test_notices_are_rate_limited_per_kind_and_say_what_was_held_back(lines):
    configure_logging("json")
    now = [100.0]
    telemetry = Telemetry("default", clock=lambda: now[0])
    assert telemetry.notice("reset", "an upstream stream broke")
    assert not telemetry.notice("reset", "an upstream stream broke")
    now[0] += 4.9
    assert not telemetry.notice("reset", "an upstream stream broke")
    assert telemetry.notice("takeover", "a call was taken over")  # a kind of its own
    now[0] += 0.2  # 5.1 s after the first
    assert telemetry.notice("reset", "an upstream stream broke")
    now[0] += 1.0
    assert not telemetry.notice("reset", "an upstream stream broke")
    found = records(lines())
    assert [(r["kind"], r.get("held_back")) for r in found] == [
        ("reset", None),
        ("takeover", None),
        ("reset", 2),
    ]
    assert found[2]["message"] == "an upstream stream broke (2 more held back)"
    assert all(r["level"] == "info" and r["logger"] == "ssewire.mcp.gateway" for r in found)


def test_transport_resets_make_rate_limited_notices(lines):
    configure_logging("json")
    telemetry = Telemetry("default")
    for attempt in range(5):
        telemetry.transport_event("reset", {"request": 1, "attempt": attempt})
    telemetry.transport_event("resumption", {"request": 1})  # no notice of its own
    notices = [r for r in records(lines()) if r["logger"] == observe.NOTICES]
    assert [n["kind"] for n in notices] == ["reset"]


# -- traces ------------------------------------------------------------------------------


def test_the_server_span_continues_the_downstream_traceparent(spans):
    provider, exporter = spans
    telemetry = Telemetry("search", tracer_provider=provider)
    assert telemetry.tracing
    with telemetry.request("POST", {"Traceparent": TRACEPARENT, "tracestate": "vendor=1"}) as trace:
        trace.note(mcp_method="tools/call", session=SID, status=200)
    [span] = exporter.get_finished_spans()
    assert span.kind is SpanKind.SERVER
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT_ID
    assert span.parent.is_remote
    assert span.name == "tools/call"
    assert span.attributes["ssewire.route"] == "search"
    assert span.attributes["http.request.method"] == "POST"
    assert span.attributes["http.response.status_code"] == 200
    assert span.attributes["mcp.session.hash"] == session_hash(SID)
    assert SID not in repr(dict(span.attributes))
    assert span.status.status_code is not StatusCode.ERROR


@pytest.mark.parametrize("header", ["00-not-a-trace-id-01", f"00-{'0' * 32}-{PARENT_ID}-01", None])
def test_an_invalid_or_missing_traceparent_starts_a_new_trace(spans, header):
    provider, exporter = spans
    headers = {"traceparent": header} if header else {}
    with Telemetry("default", tracer_provider=provider).request("GET", headers):
        pass
    [span] = exporter.get_finished_spans()
    assert span.parent is None
    assert span.context.trace_id != 0 and format(span.context.trace_id, "032x") != TRACE_ID


def test_an_error_outcome_sets_the_span_status(spans):
    provider, exporter = spans
    telemetry = Telemetry("default", tracer_provider=provider)
    with telemetry.request("POST", {}) as trace:
        trace.note(outcome="error", status=200)
    with pytest.raises(OSError), telemetry.request("POST", {}):
        raise OSError(TOKEN)
    with telemetry.request("POST", {}) as trace:
        trace.note(outcome="ok")
    first, second, third = exporter.get_finished_spans()
    assert first.status.status_code is StatusCode.ERROR
    assert second.status.status_code is StatusCode.ERROR
    assert second.attributes["error.type"] == "OSError" and TOKEN not in repr(second.to_json())
    assert third.status.status_code is not StatusCode.ERROR


def test_transport_events_are_span_events_of_the_current_request(spans):
    provider, exporter = spans
    telemetry = Telemetry("default", tracer_provider=provider)

    async def main() -> None:
        with telemetry.request("POST", {"traceparent": TRACEPARENT}):
            # as the gateway's call task: started inside the block, it sees the trace
            async def upstream_client() -> None:
                telemetry.transport_event("reset", {"request": 41, "stage": "stream", "attempt": 1})
                telemetry.transport_event("resumption", {"request": 41, "attempt": 1})
                telemetry.transport_event("reissue", {"request": 42, "previous": 41, "attempt": 1})

            await asyncio.ensure_future(upstream_client())
        telemetry.transport_event("reset", {"request": 43})  # after the request: on no span

    asyncio.run(main())
    [span] = exporter.get_finished_spans()
    assert [event.name for event in span.events] == [
        "upstream.reset",
        "upstream.resumption",
        "upstream.reissue",
    ]
    assert dict(span.events[0].attributes) == {"request": 41, "stage": "stream", "attempt": 1}
    assert span.attributes["ssewire.resets"] == 1 and span.attributes["ssewire.resumptions"] == 1


async def _echo_traceparent(scope, receive, send):
    if scope["type"] != "http":
        return
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    body = json.dumps({name: headers.get(name) for name in ("traceparent", "tracestate")}).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def echo():
    with running(_echo_traceparent, lifespan="off") as url:
        yield url


def test_upstream_requests_carry_the_server_spans_traceparent(spans, echo):
    provider, exporter = spans
    telemetry = Telemetry("default", tracer_provider=provider)

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        async with httpx.AsyncClient(event_hooks={"request": [telemetry.upstream_hook]}) as http:
            with telemetry.request("POST", {"traceparent": TRACEPARENT, "tracestate": "vendor=1"}):
                # the upstream request goes from a task started inside, as the gateway's calls do
                inside = (
                    await asyncio.ensure_future(http.get(echo, headers={"traceparent": "forged"}))
                ).json()
            outside = (await http.get(echo)).json()
        return inside, outside

    inside, outside = asyncio.run(main())
    [span] = exporter.get_finished_spans()
    version, trace_id, span_id, flags = inside["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", TRACE_ID, "01")
    assert span_id == format(span.context.span_id, "016x") != PARENT_ID  # the gateway's span, not its parent
    assert inside["tracestate"] == "vendor=1"
    assert outside == {"traceparent": None, "tracestate": None}  # no request open: nothing added


def test_without_a_tracer_provider_nothing_is_traced_or_injected(spans, echo, lines):
    _, exporter = spans
    configure_logging("json")
    telemetry = Telemetry("default")  # tracer_provider=None: logs only
    assert not telemetry.tracing

    async def main() -> dict[str, Any]:
        async with httpx.AsyncClient(event_hooks={"request": [telemetry.upstream_hook]}) as http:
            with telemetry.request("POST", {"traceparent": TRACEPARENT}) as trace:
                trace.note(mcp_method="tools/list", status=200)
                telemetry.transport_event("resumption", {"request": 3})
                return (await http.get(echo)).json()

    assert asyncio.run(main()) == {"traceparent": None, "tracestate": None}
    assert exporter.get_finished_spans() == ()
    [line] = access(lines())
    assert line["mcp_method"] == "tools/list" and line["resumptions"] == 1


def test_without_opentelemetry_installed_it_logs_only(monkeypatch, spans, lines):
    provider, exporter = spans
    configure_logging("json")
    monkeypatch.setattr(observe, "_loaded", [])
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import opentelemetry: ImportError
    telemetry = Telemetry("default", tracer_provider=provider)
    assert not telemetry.tracing

    async def main() -> None:
        with telemetry.request("POST", {"traceparent": TRACEPARENT}) as trace:
            trace.note(status=200)
            telemetry.transport_event("reset", {"request": 1})
            request = httpx.Request("POST", "http://127.0.0.1:9/mcp")
            await telemetry.upstream_hook(request)
            assert "traceparent" not in request.headers

    asyncio.run(main())
    assert exporter.get_finished_spans() == ()
    assert [line["resets"] for line in access(lines())] == [1]


def test_the_module_imports_no_opentelemetry_until_tracing_is_asked_for():
    import subprocess

    code = (
        "import sys; import ssewire.mcp.gateway.observe as o; o.Telemetry('default');"
        "print(any(m.startswith('opentelemetry') for m in sys.modules))"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert ran.stdout.strip() == "False"


# -- the upstream client's side ----------------------------------------------------------


def test_the_client_tells_its_resets_and_resumptions_and_survives_a_raising_callback():
    """A tool call's answer cut once between the client and the reference server: the
    client resumes it, tells the callback (which raises every time) of the reset and the
    resumption, and the call's answer comes whole."""
    told: list[tuple[str, dict[str, Any]]] = []

    def callback(kind: str, details: dict[str, Any]) -> None:
        told.append((kind, dict(details)))
        raise RuntimeError(TOKEN)

    cuts = []

    def plan(n: int, head: bytes) -> Cut | None:
        if head.startswith(b"POST ") and answers_a_tool_call(head) and not cuts:
            cuts.append(n)
            return Cut(at=1500)
        return None

    async def main(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
        async with (
            no_keepalive_httpx() as http,
            Client(url, profile="2025-11-25", listen=False, http=http, on_transport_event=callback) as client,
        ):
            result = await client.call_tool("countdown", {"count": 4, "size": 20000})
            return result, client.statistics()

    with running(reference_server(store_size=64)) as root:
        with fault_proxy(int(root.rsplit(":", 1)[1]), plan) as proxy:
            result, stats = asyncio.run(main(f"http://127.0.0.1:{proxy.port}/mcp"))
    assert len(result["content"][0]["text"]) >= 20000
    kinds = [kind for kind, _ in told]
    assert kinds.count("reset") == stats["resets"] >= 1
    assert kinds.count("resumption") == stats["resumptions"] >= 1
    assert stats["callback_errors"] == len(told)
    for _, details in told:
        assert isinstance(details.get("request"), int)
        assert "http" not in json.dumps(details) and TOKEN not in json.dumps(details)


@pytest.fixture
def no_global_provider(monkeypatch):
    """The process as it starts: no tracer provider set globally (the command's own case when
    opentelemetry is installed and nobody set one up)."""
    from opentelemetry import trace

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    return trace


def _forwarded_upstream(telemetry: Telemetry, echo: str, headers: dict[str, str]) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with httpx.AsyncClient(event_hooks={"request": [telemetry.upstream_hook]}) as http:
            with telemetry.request("POST", headers):
                return (await asyncio.ensure_future(http.get(echo))).json()

    return asyncio.run(main())


def test_with_no_provider_set_the_downstream_trace_context_goes_up_as_it_came(no_global_provider, echo):
    telemetry = Telemetry("default", tracer_provider="global")
    assert telemetry.tracing
    came = {"Traceparent": TRACEPARENT, "tracestate": "vendor=1"}
    assert _forwarded_upstream(telemetry, echo, came) == {
        "traceparent": TRACEPARENT,
        "tracestate": "vendor=1",
    }
    # none, or one that does not parse: nothing goes up (no trace is made up)
    assert _forwarded_upstream(telemetry, echo, {}) == {"traceparent": None, "tracestate": None}
    invalid = {"traceparent": "00-not-a-trace-id-01"}
    assert _forwarded_upstream(telemetry, echo, invalid) == {"traceparent": None, "tracestate": None}

    async def current_inside() -> Any:
        with telemetry.request("POST", came):
            return no_global_provider.get_current_span().get_span_context()

    context = asyncio.run(current_inside())  # current while the request runs, as a span would be
    assert format(context.trace_id, "032x") == TRACE_ID and format(context.span_id, "016x") == PARENT_ID

    from opentelemetry import baggage
    from opentelemetry import context as otel_context

    outer = otel_context.attach(baggage.set_baggage("tenant", "t1"))  # an outer middleware's
    try:
        with telemetry.request("POST", came):
            assert baggage.get_baggage("tenant") == "t1"  # what else the context held stays
    finally:
        otel_context.detach(outer)


def test_a_provider_set_globally_after_the_start_gets_the_spans(no_global_provider, spans, echo):
    provider, exporter = spans
    telemetry = Telemetry("default", tracer_provider="global")  # made before the provider is set
    no_global_provider._TRACER_PROVIDER = provider  # (what set_tracer_provider does, once a process)
    inside = _forwarded_upstream(telemetry, echo, {"traceparent": TRACEPARENT})
    [span] = exporter.get_finished_spans()
    assert format(span.parent.span_id, "016x") == PARENT_ID
    assert inside["traceparent"].split("-")[2] == format(span.context.span_id, "016x") != PARENT_ID
