"""W6: W2 end to end, decode then ``orjson.loads`` every event, against orjson alone."""

from __future__ import annotations

import functools
import json

import orjson
import pytest
from peers import contenders
from workloads import workload

import ssewire


def _text_of(message) -> str:
    return message["result"]["content"][0]["text"]


@functools.cache
def parsed_text_size() -> int:
    """What every W6 pipeline must parse: the tool results' text, read by the stdlib parser."""
    return sum(len(_text_of(json.loads(payload))) for payload in workload("W2").payloads)


# Each pipeline returns (messages, total length of their parsed text): proof that it parsed.


def _orjson_alone(payloads):
    n = size = 0
    for payload in payloads:
        size += len(_text_of(orjson.loads(payload)))
        n += 1
    return n, size


def _ssewire_then_orjson(cls):
    def run(chunks):
        decoder, n, size = cls(max_event_size=None), 0, 0
        loads = orjson.loads
        for chunk in chunks:
            for event in decoder.feed(chunk):
                size += len(_text_of(loads(event.data)))
                n += 1
        return n, size

    return run


def _message_decoder(chunks):
    from ssewire.jsonrpc import Message, MessageDecoder

    decoder, n, size = MessageDecoder(max_event_size=None), 0, 0
    for chunk in chunks:
        for item in decoder.feed(chunk):
            if type(item) is Message:
                size += len(_text_of(item.payload))
                n += 1
    return n, size


def _httpx_sse_then_orjson(chunks):
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder
    from peers import _text

    lines, events, n, size = SSELineDecoder(), SSEDecoder(), 0, 0
    for text in _text(chunks):
        for line in lines.decode(text):
            event = events.decode(line)
            if event is not None:
                size += len(_text_of(orjson.loads(event.data)))
                n += 1
    return n, size


def pipelines():
    yield "orjson.loads alone", _orjson_alone, True
    yield "ssewire.jsonrpc MessageDecoder", _message_decoder, False
    if ssewire.CDecoder is not None:
        yield "ssewire CRawDecoder + orjson", _ssewire_then_orjson(ssewire.CRawDecoder), False
        yield "ssewire CDecoder + orjson", _ssewire_then_orjson(ssewire.CDecoder), False
    yield "ssewire PyRawDecoder + orjson", _ssewire_then_orjson(ssewire.PyRawDecoder), False
    yield "ssewire PyDecoder + orjson", _ssewire_then_orjson(ssewire.PyDecoder), False
    if any(c.name == "httpx-sse" and c.run for c in contenders()):
        yield "httpx-sse + orjson", _httpx_sse_then_orjson, False


@pytest.mark.parametrize("pipeline", list(pipelines()), ids=lambda p: p[0])
def test_w6_decode_and_parse(measure, pipeline):
    name, run, baseline = pipeline
    work = workload("W2")
    argument = work.payloads if baseline else work.chunks
    seen = measure(
        run,
        argument,
        kind="e2e",
        workload="W6",
        title="W2 decoded, then orjson.loads per event",
        contender=name,
        ours=not baseline,
        baseline=baseline,
        bytes=work.nbytes,
        events=work.events,
    )
    assert seen == (work.events, parsed_text_size())
