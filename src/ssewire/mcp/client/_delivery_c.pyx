# cython: language_level=3, boundscheck=False, wraparound=False
"""Where a stream's safe items go, a chunk at a time, compiled: the twin of
``_delivery_py.py``.

The same rules as the pure twin, with a progress notification's way to its callback read
in C (its token, its call, the rule that keeps progress increasing after a re-issue), so
the only Python a notification runs is the caller's callback. Same calls, counters and
return values as the pure twin, item for item; the differential tests
(tests/mcp/client/test_delivery.py) keep them so. The names it reads are the pure twin's,
bound when it is imported (the clock, the logger, ``ProgressSeen``): a name replaced later
reaches the pure twin only. Two differences no JSON can make: a progress value is an
integer or a float by its C type (never by a ``__class__`` it claims), and a rule of a
``ProgressSeen`` subclass is given ``reissued`` as a bool.
"""

from cpython.dict cimport PyDict_GetItemWithError
from cpython.ref cimport PyObject

from ...jsonrpc import InvalidMessage, Message
from ..protocol.reissue import PROGRESS, ProgressSeen
from ._delivery_py import TOKEN_PREFIX, _clock, log

cdef object _MESSAGE = Message
cdef object _INVALID = InvalidMessage
cdef object _SEEN = ProgressSeen
cdef str _PROGRESS = PROGRESS
cdef str _TOKEN_PREFIX = TOKEN_PREFIX
cdef object _now = _clock
cdef object _log = log
# a Message is a tuple: its fields read by position, found by name once
cdef Py_ssize_t _METHOD = Message._fields.index("method")
cdef Py_ssize_t _PAYLOAD = Message._fields.index("payload")


cdef bint _passes(object seen, object value, bint reissued) except -1:
    """``ProgressSeen.passes``, read in C for the class itself (a subclass keeps its own)."""
    cdef object cls, high
    if type(seen) is not _SEEN:
        return seen.passes(value, reissued)
    cls = type(value)
    if cls is not int and cls is not float and (not isinstance(value, (int, float)) or cls is bool):
        return not reissued  # no value to compare
    high = seen.high
    if high is None or value > high:
        seen.high = value
        return True
    return not (reissued and value <= high)  # at or below what was delivered: a re-issue's catching up


cdef bint _progressed(dict requests, object stats, object params) except -1:
    # (PyDict_GetItemWithError: a str key's lookup cannot fail, and it keeps no error state to save)
    cdef PyObject *found
    cdef object token, record, on_progress
    if type(params) is not dict:
        return False
    found = PyDict_GetItemWithError(params, "progressToken")
    if found is NULL or type(<object>found) is not str:
        return False  # not a token of this client's
    token = <object>found
    found = PyDict_GetItemWithError(requests, token)
    record = None if found is NULL else <object>found
    on_progress = None if record is None or record.token != token else record.on_progress
    if on_progress is None:
        if token.startswith(_TOKEN_PREFIX):  # one of ours: its call ended
            stats.late_progress += 1
            return True
        return False  # not a token of this client's
    found = PyDict_GetItemWithError(params, "progress")
    if not _passes(record.progress, None if found is NULL else <object>found, record.reissued):
        stats.repeated_progress += 1  # a re-issue's run catching up: delivered once already
        return True
    record.times.append(_now())
    try:
        on_progress(params)
    except Exception:  # the caller's callback failed: its bug, not the stream's; say so
        stats.callback_errors += 1
        _log.exception("a progress callback raised")
    return True


cdef inline object _params(object payload):
    """``payload.get("params")``, a dict's read in C."""
    cdef PyObject *found
    if type(payload) is not dict:
        return payload.get("params")
    found = PyDict_GetItemWithError(payload, "params")
    return None if found is NULL else <object>found


def progressed(dict requests not None, stats, params):
    """See ``_delivery_py.progressed``."""
    return _progressed(requests, stats, params)


def deliver(items, dict requests not None, stats, route, too_large):
    """See ``_delivery_py.deliver``."""
    cdef Py_ssize_t delivered = 0
    cdef object item, payload
    for item in items:
        if type(item) is _MESSAGE:
            delivered += 1
            payload = (<tuple>item)[_PAYLOAD]
            if (<tuple>item)[_METHOD] != _PROGRESS or not _progressed(requests, stats, _params(payload)):
                route(payload)
        elif too_large is not None and isinstance(item, _INVALID) and item.reason.startswith("too large"):
            too_large(item)
    return delivered
