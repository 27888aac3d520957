"""The two twins of the stream ledger's booking loop (``_books_py``, ``_books_c``) give the
same verdicts and leave the same books, on random conversations: streams opened, resumed,
fed in random batches (ids repeated, reused across streams, messages copied), closed and
finished, on both revisions, bounded or not, with a stream's facts kept or not. And which
twin the ledger books with is chosen by the decoder's switches."""

from __future__ import annotations

import gc

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ssewire.jsonrpc import Kind, Message, OtherEvent, Priming, TornTail
from ssewire.mcp import PROFILES
from ssewire.mcp.streams import _books, guard
from ssewire.mcp.streams import ledger as ledger_module
from ssewire.mcp.streams.guard import GuardStats, _dispatched, _keyed_digest
from ssewire.mcp.streams.ledger import LedgerMessage, StreamLedger, dispatched
from ssewire.mcp.streams.verdicts import MIXED, EventVerdict
from tests.support.twins import BOOK_TWINS, assert_switches_choose, book_twin, booking_with

NAMES = [f"s{n}" for n in range(5)]
IDS = ["", "a1", "a2", "a3", "b1", "b2"]  # few, so they repeat, move on and come back
POOL = [
    LedgerMessage(Kind.NOTIFICATION, None, {"method": "notifications/progress", "params": {"progress": 1}}),
    LedgerMessage(Kind.NOTIFICATION, None, {"method": "notifications/progress", "params": {"progress": 2}}),
    LedgerMessage(Kind.NOTIFICATION, None, {"method": "notifications/tools/list_changed"}),
    LedgerMessage(Kind.RESPONSE, 1, {"id": 1, "result": {}}),
    LedgerMessage(Kind.ERROR, 2, {"id": 2, "error": {"code": -1, "message": "no"}}),
    LedgerMessage(Kind.REQUEST, "s-1", {"id": "s-1", "method": "ping"}),
]

EVENT = st.tuples(st.sampled_from(IDS), st.lists(st.sampled_from(POOL), max_size=2))


def _message(event_id: str, carried: LedgerMessage, with_bytes: bool) -> Message:
    """A decoder's message for ``carried`` (its bytes kept, or not: then known by its payload)."""
    data = orjson.dumps(carried.payload) if with_bytes else b""
    method = carried.payload.get("method")
    return Message(carried.kind, carried.payload, carried.id, method, "message", event_id, len(data), data)


def _batch(event_id: str, members: list[LedgerMessage]) -> Message:
    payload = [{"jsonrpc": "2.0", **member.payload} for member in members]
    data = orjson.dumps(payload)
    return Message(Kind.BATCH, payload, None, None, "message", event_id, len(data), data)


# what a live reader's decoder gives: messages (with their bytes or not), batches, priming
# events, other events (an error among them), torn tails
ITEM = st.one_of(
    st.builds(_message, st.sampled_from(IDS), st.sampled_from(POOL), st.booleans()),
    st.builds(_batch, st.sampled_from(IDS), st.lists(st.sampled_from(POOL), min_size=1, max_size=2)),
    st.builds(Priming, st.sampled_from(IDS)),
    st.builds(OtherEvent, st.sampled_from(["ping", "error"]), st.just(b"x"), st.sampled_from(IDS)),
    st.builds(TornTail, st.integers(1, 9), st.sampled_from(IDS)),
)
OPERATION = st.one_of(
    st.tuples(st.just("open"), st.sampled_from(NAMES), st.none() | st.sampled_from(IDS[1:])),
    st.tuples(st.just("resume"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("events"), st.sampled_from(NAMES), st.lists(EVENT, max_size=6), st.booleans()),
    st.tuples(st.just("close"), st.sampled_from(NAMES), st.booleans()),
    st.tuples(st.just("finish"), st.sampled_from(NAMES)),
    st.tuples(st.just("request"), st.sampled_from([1, 2, "s-1"])),
    st.tuples(
        st.just("sift"), st.sampled_from(NAMES), st.lists(ITEM, max_size=6), st.sampled_from([None, 1, 2])
    ),
)
DIGESTS = {"hash": hash, "keyed": _keyed_digest}  # the compiled twin calls the first in C


def converse(book, operations, profile, bound, facts, digest="hash") -> tuple:
    """Run ``operations`` on a fresh ledger booking with ``book`` (a twin module): what
    each answered (or raised), and the books left."""
    with booking_with(book):
        books = StreamLedger(profile, bound=bound, facts=facts)
        answers = [_answer(books, operation, DIGESTS[digest]) for operation in operations]
    state = (
        books._streams,
        books._chains,
        books._event_owner,
        books._message_owner,
        books._reusing,
        books._requests,
        books._writer,
    )
    return answers, state


def _answer(books: StreamLedger, operation: tuple, digest):
    kind, *args = operation
    try:
        if kind == "sift":
            name, items, answer_to = args
            stats = GuardStats()
            sifted = books.sift(
                name, items, answer_to=answer_to, digest=digest, dispatch_of=_dispatched, stats=stats
            )
            return sifted, stats.as_dict()
        if kind == "open":
            name, last_event_id = args
            return books.open(name, "session", last_event_id=last_event_id).root
        if kind == "resume":
            broken, name = args
            return books.resume(broken, name, "session").resumes
        if kind == "events":
            name, events, book_repeats = args
            batch = [dispatched(event_id, messages) for event_id, messages in events]
            return books.events(name, batch, book_repeats=book_repeats)
        if kind == "booked":  # (a sift's chunk, booked as the events it dispatched)
            name, batch = args
            return books.events(name, batch, book_repeats=False)
        if kind == "close":
            name, disconnected = args
            return books.close(name, disconnected=disconnected)
        if kind == "finish":
            return books.finish(args[0])
        books.request_sent("session", args[0])
        return None
    except (KeyError, ValueError) as error:  # an unknown or closed stream: the same refusal
        return type(error).__name__, str(error)


@pytest.mark.parametrize("name", [name for name in BOOK_TWINS if name != "py"])
@settings(max_examples=300, deadline=None)
@given(
    operations=st.lists(OPERATION, max_size=30),
    revision=st.sampled_from(sorted(PROFILES)),
    bound=st.sampled_from([None, 2, 5]),
    facts=st.booleans(),
)
def test_the_compiled_twin_books_as_the_pure_one(name, operations, revision, bound, facts):
    profile = PROFILES[revision]
    for digest in DIGESTS:
        compiled = converse(book_twin(name), operations, profile, bound, facts, digest)
        assert compiled == converse(_books.py_twin, operations, profile, bound, facts, digest)


@pytest.mark.parametrize("name", BOOK_TWINS)
@settings(max_examples=200, deadline=None)
@given(operations=st.lists(OPERATION, max_size=30), bound=st.sampled_from([None, 2, 5]))
def test_sifting_items_books_what_their_dispatched_events_book(name, operations, bound):
    """`sift`'s own reading of a message (its bytes' digest) is the guard's `_dispatched`:
    sifting a chunk leaves the books that booking its dispatched events leaves (repeats
    unbooked, torn tails never booked), and answers their verdicts' items."""
    as_events = []
    for operation in operations:
        if operation[0] == "sift":
            _, stream, items, answer_to = operation
            events = [_dispatched(item, answer_to) for item in items if type(item) is not TornTail]
            operation = ("booked", stream, events)
        as_events.append(operation)
    profile = PROFILES["2025-11-25"]
    digest = "hash" if guard._digest is hash else "keyed"  # what _dispatched digests with, here
    sifted_answers, sifted = converse(book_twin(name), operations, profile, bound, True, digest)
    booked_answers, booked = converse(book_twin(name), as_events, profile, bound, True, digest)
    assert sifted == booked
    for operation, sifted_answer, booked_answer in zip(
        operations, sifted_answers, booked_answers, strict=True
    ):
        if operation[0] != "sift" or not isinstance(booked_answer, list):
            assert sifted_answer == booked_answer
            continue
        (safe, unsafe), stats = sifted_answer
        items = [item for item in operation[2] if type(item) is not TornTail]
        kept = [
            i
            for i, v in zip(items, booked_answer, strict=False)
            if v == EventVerdict.NEW and type(i) is not Priming
        ]
        assert unsafe == next((v for v in booked_answer if v.unsafe), None)
        assert safe == kept
        assert stats["torn"] == len(operation[2]) - len(items)


@pytest.mark.parametrize("name", BOOK_TWINS)
@settings(max_examples=200, deadline=None)
@given(operations=st.lists(OPERATION, max_size=30), bound=st.sampled_from([2, 5, 100]))
@example(  # two chains write, one is finished: the other's entries stay, without a writer of their own
    operations=[
        ("open", "s0", None),
        ("events", "s0", [("a1", [POOL[0]])], True),
        ("open", "s1", None),
        ("events", "s1", [("b1", [POOL[1]])], True),
        ("finish", "s0"),
        ("finish", "s1"),
        ("open", "s2", None),
        ("events", "s2", [("a1", [POOL[0]])], True),
    ],
    bound=5,
)
def test_a_scopes_writer_owns_every_entry_of_its_tables(name, operations, bound):
    """What lets `forget` drop a scope's tables whole: while one chain is its writer, every
    entry of them is that chain's, and a scope without a writer has no entries."""
    with booking_with(book_twin(name)):
        books = StreamLedger(PROFILES["2025-11-25"], bound=bound)
        for operation in operations:
            _answer(books, operation, hash)
            for scope in {*books._event_owner, *books._message_owner, *books._writer}:
                tables = (books._event_owner.get(scope, {}), books._message_owner.get(scope, {}))
                writer = books._writer.get(scope)
                if writer is None:
                    assert not any(tables), operation
                elif writer is not MIXED:
                    assert {owner[0] for table in tables for owner in table.values()} <= {writer}, operation


@pytest.mark.parametrize("name", BOOK_TWINS)
def test_a_lone_writer_is_forgotten_whole_and_a_mixed_scope_entry_by_entry(name):
    with booking_with(book_twin(name)):
        books = StreamLedger(PROFILES["2025-11-25"], bound=100)
        for stream, event_id, message in (("s0", "a1", POOL[0]), ("s1", "b1", POOL[1])):
            books.open(stream, "session")
            books.events(stream, [dispatched(event_id, [message])])
        assert books._writer == {"session": MIXED}
        books.finish("s0")  # s1's entries stay, and the scope stays mixed
        assert set(books._event_owner["session"]) == {"b1"} and books._writer == {"session": MIXED}
        books.finish("s1")
        assert books.books == 0 and books._writer == {}
        books.open("s2", "session")
        books.events("s2", [dispatched("c1", [POOL[2]])])
        assert books._writer == {"session": "s2"}  # alone since the tables were empty
        books.finish("s2")
        assert books.books == 0 and books._writer == {} and not books._event_owner


def test_a_conversation_with_every_verdict_is_booked_alike_by_each_twin():
    """One conversation that reaches every verdict (so the property above is not met by
    conversations that never leave the common path)."""
    progress, response = POOL[0], POOL[3]
    operations = [
        ("open", "s0", None),
        ("events", "s0", [("a1", [progress]), ("a2", [])], True),
        ("close", "s0", True),
        ("resume", "s0", "s1"),
        ("events", "s1", [("a1", [progress]), ("a3", [response])], False),  # a replay, then new
        ("open", "s2", None),
        ("events", "s2", [("b1", [response])], False),  # a copy of what s1 delivered
        ("close", "s1", True),
        ("resume", "s1", "s3"),
        ("events", "s3", [("a3", [POOL[1]])], False),  # its id delivered with other content
        ("close", "s2", True),
        ("resume", "s2", "s4"),
        ("events", "s4", [("b2", [progress])], False),  # another chain's message, new id
    ]
    for twin in BOOK_TWINS:
        answers, _ = converse(book_twin(twin), operations, PROFILES["2025-11-25"], 5, True)
        verdicts = {str(v) for answer in answers if isinstance(answer, list) for v in answer}
        assert verdicts >= {"new", "replay", "copy", "changed-payload"}, (twin, answers)


def test_the_ledger_books_with_the_twin_the_switches_choose():
    assert ledger_module._twin is _books.twin  # the ledger books with what the selector picked
    assert_switches_choose("ssewire.mcp.streams._books")


@pytest.mark.parametrize("name", [twin for twin in BOOK_TWINS if twin == "c"])
def test_the_compiled_twins_owners_are_not_left_to_the_collector(name):
    """Each event a live reader books keeps an owner tuple until its call ends; tracked,
    every one would be passed over by the collector's young pass before it untracks it (a
    reader's events between two passes: 6-11% of a 10,000-notification call's time)."""
    enabled = gc.isenabled()
    gc.disable()  # (a collection in between would untrack them itself)
    try:
        with booking_with(book_twin(name)):
            books = StreamLedger(PROFILES["2025-11-25"], bound=100)
            books.open("s0", "session")
            books.events("s0", [dispatched("a1", [POOL[0]]), dispatched("a2", [POOL[1]])])
            owners = [*books._event_owner["session"].values(), *books._message_owner["session"].values()]
            assert len(owners) == 4 and owners[0] == ("s0", 0)
            assert not any(map(gc.is_tracked, owners))
    finally:
        if enabled:
            gc.enable()
