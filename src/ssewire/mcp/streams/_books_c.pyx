# cython: language_level=3
"""The stream ledger's booking loop, compiled: the twin of ``_books_py.py``.

The same statements as the pure twin, with the books typed (dict, set and list calls
made in C, the counters C integers), so a live reader's event costs a few lookups and no
bytecode. Verdicts and types are imported from ``verdicts``, defined once there. Same
verdicts and the same books as the pure twin, event for event; the differential tests
(tests/mcp/streams/test_books.py) keep them so.
"""

from ...jsonrpc import Kind
from .verdicts import ANSWERS, EventVerdict, identifiable

cdef object _NOTIFICATION = Kind.NOTIFICATION
cdef object _NEW = EventVerdict.NEW
cdef object _REPLAY = EventVerdict.REPLAY
cdef object _COPY = EventVerdict.COPY
cdef object _CHANGED_PAYLOAD = EventVerdict.CHANGED_PAYLOAD
cdef object _OTHER_STREAM = EventVerdict.OTHER_STREAM
cdef object _RESTARTED = EventVerdict.RESTARTED
cdef frozenset _ANSWERS = ANSWERS


def book(
    ledger,
    stream,
    chain,
    dict id_owners not None,
    dict message_owners not None,
    batch,
    bint book_repeats,
):
    """A stream's dispatched events booked in turn, ``(event_id, messages, content, keys)``
    each; the verdict of each, up to the first unsafe one. ``id_owners`` and
    ``message_owners`` are the scope's tables; the ledger trims them after."""
    cdef object root = stream.root
    cdef object scope = stream.scope
    cdef bint resumed = stream.resumes is not None
    cdef bint bounded = ledger.bound is not None
    cdef bint facts = ledger.facts
    cdef dict delivered_ids = chain.delivered_ids
    cdef set answered = chain.answered
    cdef list owned_ids = chain.owned_ids
    cdef list owned_messages = chain.owned_messages
    # the stream's and chain's counters, kept here while the batch is read
    cdef object previous_id = stream.previous_id
    cdef object last_event_id = stream.last_event_id
    cdef Py_ssize_t index = stream.events
    cdef Py_ssize_t position = chain.length
    cdef list verdicts = []
    cdef object event_id, messages, content, keys, own_id, delivered, repeat, seen
    cdef object message, key, pairs, before, other
    cdef bint foreign, restarted, copied, has_id
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
                    id_owners[own_id] = (root, position)
                    if bounded:
                        owned_ids.append(own_id)
            if messages:
                pairs = (
                    zip(messages, keys, strict=True) if len(messages) > 1 else ((messages[0], keys[0]),)
                )
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
                        message_owners[key] = (root, position)
                        if bounded:
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
    return verdicts
