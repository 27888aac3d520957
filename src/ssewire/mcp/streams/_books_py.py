"""The stream ledger's booking loop, pure Python: the twin of ``_books_c.pyx``.

Same verdicts and the same books as the compiled twin, event for event; the differential
tests (tests/mcp/streams/test_books.py) keep them so. Every rule of ownership is here once
per twin: `StreamLedger.events` looks the books up and calls `book`; a live reader's chunk
of decoder items goes through `sift` (`StreamLedger.sift`), which books them with `book`.
"""

from __future__ import annotations

from typing import Any

from ...jsonrpc import Kind, Message, Priming, TornTail
from .verdicts import ANSWERS, MIXED, EventVerdict, identifiable

# enum members bound once: read through their class, each costs a lookup in the enum's machinery
_NOTIFICATION, _REQUEST = Kind.NOTIFICATION, Kind.REQUEST
_NEW, _REPLAY, _COPY = EventVerdict.NEW, EventVerdict.REPLAY, EventVerdict.COPY
_CHANGED_PAYLOAD, _OTHER_STREAM, _RESTARTED = (
    EventVerdict.CHANGED_PAYLOAD,
    EventVerdict.OTHER_STREAM,
    EventVerdict.RESTARTED,
)
_ANSWERS = ANSWERS


def book(
    ledger: Any,
    stream: Any,
    chain: Any,
    id_owners: dict[Any, Any],
    message_owners: dict[Any, Any],
    batch: Any,
    book_repeats: bool,
) -> list[EventVerdict]:
    """A stream's dispatched events booked in turn, ``(event_id, messages, content, keys)``
    each; the verdict of each, up to the first unsafe one. ``id_owners`` and
    ``message_owners`` are the scope's tables; the ledger trims them after."""
    root, scope = stream.root, stream.scope
    resumed = stream.resumes is not None
    bound, facts = ledger.bound, ledger.facts
    delivered_ids, answered = chain.delivered_ids, chain.answered
    owned_ids, owned_messages = chain.owned_ids, chain.owned_messages
    # the stream's and chain's counters, kept here while the batch is read
    previous_id, last_event_id = stream.previous_id, stream.last_event_id
    index, position = stream.events, chain.length
    writer = ledger._writer.get(scope)  # the one chain that wrote the scope's tables (StreamLedger.forget)
    verdicts: list[EventVerdict] = []
    try:
        for event_id, messages, content, keys in batch:
            own_id = event_id if event_id != previous_id else ""  # Stream.own_id, inlined
            previous_id = event_id
            delivered = delivered_ids.get(own_id) if own_id else None
            repeat = None
            if delivered is not None:
                repeat = _REPLAY if delivered == content else _CHANGED_PAYLOAD
                if not book_repeats:
                    verdicts.append(repeat)
                    if repeat is _CHANGED_PAYLOAD:
                        break
                    continue
            foreign = restarted = copied = False
            owner = (root, position)  # one tuple for the event's id and its messages
            if own_id and own_id != last_event_id:
                if facts:
                    stream.event_ids.append((index, own_id))
                    ledger._keep_recent(stream.event_ids)  # a long-lived stream keeps its recent ids
                last_event_id = own_id
                seen = id_owners.get(own_id)
                if seen is not None:
                    if resumed:
                        restarted, copied = ledger._replay(stream, seen, index)
                        foreign = seen[0] != root
                        if scope in ledger._reusing:  # ids do not tell streams apart here: content does
                            foreign = restarted = copied = False
                    elif seen[0] != root:
                        stream.reused_ids += 1
                        ledger._reusing[scope] = None
                        ledger._trim(ledger._reusing)
                else:
                    id_owners[own_id] = owner
                    if writer != root:
                        writer = root if writer is None else MIXED
                    if bound is not None:
                        owned_ids.append(own_id)
            if messages:
                pairs = zip(messages, keys, strict=True) if len(messages) > 1 else ((messages[0], keys[0]),)
                for message, key in pairs:
                    seen = message_owners.get(key)
                    if seen is not None:
                        if resumed:
                            before, other = ledger._replay(stream, seen, index)
                            restarted, copied = restarted or before, copied or other
                        elif seen[0] != root and not ledger._legitimate_copy(scope, message):
                            if facts:
                                has_id = message.kind is not _NOTIFICATION
                                stream.copies[has_id].append(index)
                                ledger._keep_recent(stream.copies[has_id])
                            copied = True
                    else:
                        message_owners[key] = owner
                        if writer != root:
                            writer = root if writer is None else MIXED
                        if bound is not None:
                            owned_messages.append(key)
                    if message.kind in _ANSWERS:
                        answered.add(message.id)
            index += 1
            position += 1
            if repeat is not None:  # the chain delivered this id: its cursor stays
                verdicts.append(repeat)
                if repeat is _CHANGED_PAYLOAD:
                    break
                continue
            if own_id:
                delivered_ids[own_id] = content
                chain.cursor, chain.cursor_at = own_id, position - 1
            if foreign:
                verdicts.append(_OTHER_STREAM)
                break
            # a message seen before is surely the same one only when its id says so, or its
            # progress value (which must increase); a list-changed or a log line may repeat
            if (restarted or copied) and messages and all(map(identifiable, messages)):
                verdicts.append(_RESTARTED if restarted else _COPY)
                if restarted:
                    break
                continue
            verdicts.append(_NEW)
    finally:
        stream.previous_id, stream.last_event_id = previous_id, last_event_id
        stream.events, chain.length = index, position
        if writer is not None:
            ledger._writer[scope] = writer
    return verdicts


def sift(
    ledger: Any,
    stream: Any,
    chain: Any,
    id_owners: dict[Any, Any],
    message_owners: dict[Any, Any],
    items: Any,
    answer_to: Any,
    digest: Any,
    dispatch_of: Any,
    stats: Any,
) -> tuple[list[Any], EventVerdict | None]:
    """A live reader's chunk of decoder items, booked (repeats unbooked): the items safe to
    deliver, in order, and the unsafe verdict that stopped the booking (or None).

    A notification or request with its bytes is known by their ``digest``; any other item
    by ``dispatch_of(item, answer_to)`` (its ``(event_id, messages, content, keys)``). A
    torn tail is counted, never booked; a priming event only moves the cursor; a replay or
    a copy is dropped and counted. ``stats`` (a ``GuardStats``) takes the counts."""
    events: list[Any] = []
    batch: list[Any] = []
    for item in items:
        cls = type(item)
        if cls is Message and (item.kind is _NOTIFICATION or item.kind is _REQUEST) and item.data:
            content = digest(item.data)
            batch.append((item.event_id, (item,), content, (content,)))
        elif cls is TornTail:
            stats.torn += 1
            stats.torn_bytes += item.discarded
            continue
        else:
            batch.append(dispatch_of(item, answer_to))
        events.append(item)
    verdicts = book(ledger, stream, chain, id_owners, message_owners, batch, False)
    safe: list[Any] = []
    delivered = duplicates = 0
    unsafe = None
    for item, verdict in zip(events, verdicts, strict=False):  # the verdicts stop at an unsafe one
        if verdict is _NEW:
            cls = type(item)
            if cls is not Priming:
                safe.append(item)
                delivered += cls is Message
        elif verdict is _REPLAY or verdict is _COPY:
            duplicates += 1
        else:
            unsafe = verdict
            break
    stats.duplicates += duplicates
    if unsafe is None:  # what an unsafe verdict stops is never handed to the caller
        stats.delivered += delivered
    return safe, unsafe


def disown(table: dict[Any, tuple[Any, int]], keys: list[Any], root: Any) -> None:
    """Take back the entries ``root`` owns among ``keys`` in a scope's table."""
    for key in keys:
        owner = table.get(key)
        if owner is not None and owner[0] == root:
            del table[key]
