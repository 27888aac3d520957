"""The inbound ladder, rule by rule: each a pure function of the request, returning the
refusal both servers answer with (held to the servers themselves by test_inbound_matrix)."""

import pytest

from ssewire.mcp.protocol import inbound
from ssewire.mcp.protocol.codes import INVALID_REQUEST, PARSE_ERROR
from ssewire.mcp.protocol.inbound import Refusal, read_message, valid_request_id

BOTH = "application/json, text/event-stream"


@pytest.mark.parametrize(
    ("ident", "valid"),
    [
        ("a", True),
        ("", True),
        (0, True),
        (-7, True),
        (2**63 - 1, True),
        (1.0, True),  # JSON Schema's integer, as the official SDKs read it
        (float(2**53), True),
        (float(2**53 + 2), False),  # no longer the integer the client wrote
        (1.5, False),
        (None, False),  # MCP: never null
        (True, False),
        ([1], False),
        ({"a": 1}, False),
    ],
)
def test_the_request_id_rule(ident, valid):
    assert valid_request_id(ident) is valid


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"accept": BOTH, "content-type": "application/json"}, None),
        ({"accept": "*/*", "content-type": "application/json; charset=utf-8"}, None),
        ({"content-type": "application/json"}, 406),
        ({"accept": "application/json", "content-type": "application/json"}, 406),
        ({"accept": "application/json, text/event-stream;q=0", "content-type": "application/json"}, 406),
        ({"accept": BOTH}, 415),
        ({"accept": BOTH, "content-type": "text/plain"}, 415),
        ({"content-type": "text/plain"}, 406),  # Accept is the first rung
    ],
)
def test_the_post_header_ladder(headers, status):
    refusal = inbound.first_refusal(inbound.POST_HEADERS, headers)
    assert (refusal.status if refusal else None) == status
    assert refusal is None or refusal.code == INVALID_REQUEST


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"mcp-session-id": "s"}, None),
        ({"mcp-session-id": "s", "mcp-protocol-version": " 2025-11-25 "}, None),
        ({}, 400),
        ({"mcp-session-id": "s", "mcp-protocol-version": "1999-01-01"}, 400),
    ],
)
def test_the_session_header_ladder(headers, status):
    refusal = inbound.first_refusal(inbound.SESSION_HEADERS, headers)
    assert (refusal.status if refusal else None) == status


def test_an_unknown_version_is_named_but_not_echoed_whole():
    refusal = inbound.known_version({"mcp-protocol-version": "x" * 10_000})
    assert refusal is not None and len(refusal.text) < 100


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"", PARSE_ERROR),
        (b'{"jsonrpc": "2.0", "id": 1,', PARSE_ERROR),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": NaN}}', PARSE_ERROR),
        (b'\xef\xbb\xbf{"jsonrpc": "2.0", "id": 1, "method": "ping"}', PARSE_ERROR),  # RFC 8259 8.1
        ('{"jsonrpc": "2.0", "id": 1, "method": "ping"}'.encode("utf-16"), PARSE_ERROR),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping\xff"}', PARSE_ERROR),
        (b"[]", INVALID_REQUEST),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', INVALID_REQUEST),
        (b'"ping"', INVALID_REQUEST),
        (b'{"id": 1, "method": "ping"}', INVALID_REQUEST),
        (b'{"jsonrpc": 2.0, "id": 1, "method": "ping"}', INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 1}', INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "method": "initialize"}', INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": 1}', INVALID_REQUEST),  # neither request nor response
        (b'{"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}', INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": null, "result": {}}', INVALID_REQUEST),
    ],
)
def test_a_body_that_is_not_one_message_this_transport_takes_is_refused(body, code):
    refused = read_message(body)
    assert isinstance(refused, Refusal) and (refused.status, refused.code) == (400, code)


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "id": "a", "method": "tools/list"}',
        b'{"jsonrpc": "2.0", "id": 1.0, "method": "ping"}',
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        b'{"jsonrpc": "2.0", "id": "srv-1", "result": {}}',
        b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}',
    ],
)
def test_a_message_that_climbs_the_ladder_is_returned_parsed(body):
    message = read_message(body)
    assert isinstance(message, dict) and message["jsonrpc"] == "2.0"


def test_the_id_of_a_refused_request_is_echoed_only_when_it_is_one():
    named = read_message(b'{"jsonrpc": "2.0", "id": 7, "method": 1}')
    unnamed = read_message(b'{"jsonrpc": "2.0", "id": [7], "method": 1}')
    assert isinstance(named, Refusal) and named.ident == 7
    assert isinstance(unnamed, Refusal) and unnamed.ident is None


def test_a_rule_added_to_the_ladder_is_climbed():
    def no_pings(message):
        return Refusal(400, INVALID_REQUEST, "no pings") if message.get("method") == "ping" else None

    rules = (*inbound.MESSAGE_RULES, no_pings)
    refused = read_message(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', rules)
    assert isinstance(refused, Refusal) and refused.text == "no pings"
