"""W6: W2 end to end, decode then ``orjson.loads`` every event, against orjson alone."""

from __future__ import annotations

import pytest

import ssewire
from peers import contenders
from workloads import workload

orjson = pytest.importorskip("orjson")


def _orjson_alone(payloads):
    for payload in payloads:
        orjson.loads(payload)
    return len(payloads)


def _ssewire_then_orjson(cls):
    def run(chunks):
        decoder, n = cls(max_event_size=None), 0
        loads = orjson.loads
        for chunk in chunks:
            for event in decoder.feed(chunk):
                loads(event.data)
                n += 1
        return n

    return run


def _message_decoder(chunks):
    from ssewire.jsonrpc import Message, MessageDecoder

    decoder, n = MessageDecoder(max_event_size=None), 0
    for chunk in chunks:
        for item in decoder.feed(chunk):
            n += type(item) is Message
    return n


def _httpx_sse_then_orjson(chunks):
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    from peers import _text

    lines, events, n = SSELineDecoder(), SSEDecoder(), 0
    for text in _text(chunks):
        for line in lines.decode(text):
            event = events.decode(line)
            if event is not None:
                orjson.loads(event.data)
                n += 1
    return n


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
    assert seen == work.events
