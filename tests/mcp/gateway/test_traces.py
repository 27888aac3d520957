"""The gateway's traces end to end (issue 33, item 4): a tool call whose upstream answer
the fault proxy cuts once is one SERVER span, continuing the downstream client's W3C
trace, with the reset and the resumption as span events; the upstream request carries
the gateway's span as its parent; the access line counts both, and names the session
only by its hash.

Needs the wiring of /tmp/i33/observe-wiring.md (``Gateway(..., telemetry=...)``)."""

from __future__ import annotations

import json
import logging
import time

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import ssewire
from ssewire.mcp.gateway.observe import ACCESS, Telemetry, session_hash
from tests.support.faultproxy import Cut
from tests.support.gateway_runs import countdown, gateway_over, messages, session
from tests.support.resets import answers_a_tool_call

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
KEY = b"observe-test-key" * 2


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _calls(exporter: InMemorySpanExporter, within: float = 10.0) -> list:
    """The finished spans of tools/call (a span ends when its downstream request does: a
    moment after the client read the last byte)."""
    deadline = time.monotonic() + within
    while True:
        found = [
            s for s in exporter.get_finished_spans() if s.attributes.get("mcp.method.name") == "tools/call"
        ]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def test_a_healed_call_is_one_server_span_with_its_reset_and_resumption(upstream, spans, caplog):
    provider, exporter = spans
    heads: list[bytes] = []

    def cut_the_first_call_once(n: int, head: bytes) -> Cut | None:
        heads.append(head)
        if (
            head.startswith(b"POST ")
            and answers_a_tool_call(head)
            and sum(h.startswith(b"POST ") and answers_a_tool_call(h) for h in heads) == 1
        ):
            return Cut(at=1500)  # past the priming event: resumable
        return None

    telemetry = Telemetry("default", key=KEY, tracer_provider=provider)
    caplog.set_level(logging.INFO, logger="ssewire")
    with (
        gateway_over(upstream, cut_the_first_call_once, telemetry=telemetry) as gw,
        httpx.Client(timeout=30) as http,
    ):
        headers = session(http, gw.url)
        sid = headers["Mcp-Session-Id"]
        call = countdown(5, 4, 0.005, size=20000)
        with http.stream(
            "POST", gw.url, json=call, headers={**headers, "traceparent": TRACEPARENT}
        ) as answer:
            assert answer.status_code == 200
            decoder = ssewire.Decoder()
            events = [event for chunk in answer.iter_bytes() for event in decoder.feed(chunk)]
        got = messages(events)
        assert got[-1]["id"] == 5 and "result" in got[-1], got[-1]
        assert len(got[-1]["result"]["content"][0]["text"]) >= 20000
        assert gw.proxy is not None and gw.proxy.stats.cuts == 1
        [span] = _calls(exporter)

    # the span: the downstream client's trace, the gateway's server span, healed
    assert span.kind is SpanKind.SERVER
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT_ID
    names = [event.name for event in span.events]
    assert "upstream.reset" in names and "upstream.resumption" in names
    assert names.index("upstream.reset") < names.index("upstream.resumption")
    assert span.attributes["ssewire.resets"] >= 1 and span.attributes["ssewire.resumptions"] >= 1
    assert span.attributes["http.response.status_code"] == 200
    assert span.attributes["mcp.session.hash"] == session_hash(sid, KEY)
    assert span.status.status_code is not StatusCode.ERROR
    assert sid not in json.dumps(span.to_json())

    # the upstream POST of the call carried the gateway's span as its parent
    ours = f"00-{TRACE_ID}-{format(span.context.span_id, '016x')}-01".encode()
    posted = [h for h in heads if h.startswith(b"POST ") and answers_a_tool_call(h)]
    assert posted and all(b"traceparent: " + ours in h.lower() for h in posted[:1])

    # the access line of the call counts the reset and the resumption; the session as its hash
    lines = [r for r in caplog.records if r.name == ACCESS and r.fields.get("mcp_method") == "tools/call"]
    [line] = lines
    assert line.fields["resets"] >= 1 and line.fields["resumptions"] >= 1
    assert line.fields["outcome"] == "ok" and line.fields["status"] == 200
    assert line.fields["session"] == session_hash(sid, KEY)
    assert all(
        sid not in r.getMessage() and sid not in repr(getattr(r, "fields", "")) for r in caplog.records
    )
    # and the reset was an info notice
    assert any(
        getattr(r, "fields", {}).get("kind") == "reset" for r in caplog.records if r.levelno == logging.INFO
    )


def test_an_untraced_request_starts_a_trace_of_its_own(upstream, spans):
    provider, exporter = spans
    telemetry = Telemetry("default", tracer_provider=provider)
    with gateway_over(upstream, telemetry=telemetry) as gw, httpx.Client(timeout=30) as http:
        headers = session(http, gw.url)
        answer = http.post(gw.url, json=countdown(1, 1, 0.0), headers={**headers, "traceparent": "garbage"})
        assert answer.status_code == 200
        [span] = _calls(exporter)
    assert span.parent is None and span.kind is SpanKind.SERVER
    assert span.context.trace_id != int(TRACE_ID, 16)
    initialize = [
        s for s in exporter.get_finished_spans() if s.attributes.get("mcp.method.name") == "initialize"
    ]
    assert len(initialize) == 1 and initialize[0].kind is SpanKind.SERVER
