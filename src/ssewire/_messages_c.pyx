# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled per-event step of ``MessageDecoder``: an event to its item, in C for the
shapes nearly every message has (a request, a notification, a result, an error response,
each a JSON object); any other event goes to the pure step given as ``slow``
(``MessageDecoder._item``, where every rule is written), so both give the same items; the
differential tests (tests/jsonrpc/test_messages_twin.py) keep them so. The item types are
``_items``', defined once."""

from cpython.dict cimport PyDict_GetItem
from cpython.ref cimport PyObject

import orjson

from ._items import Kind, Message

cdef extern from *:
    """
    /* A Message (a tuple subclass) from its eight fields, as tuple.__new__(Message, fields)
       makes it without the argument tuple. Up to 3.13 filling a tuple subclass allocated
       by tp_alloc is what CPython's tuple_subtype_new does; from 3.14 on tuples cache
       their hash, so there we go through tp_new itself. It stays tracked by the
       collector: its payload is a container. */
    static PyObject *ssewire_new_message(PyObject *cls, PyObject *f0, PyObject *f1,
                                         PyObject *f2, PyObject *f3, PyObject *f4,
                                         PyObject *f5, PyObject *f6, PyObject *f7) {
        PyTypeObject *tp = (PyTypeObject *)cls;
        PyObject *fields[8] = {f0, f1, f2, f3, f4, f5, f6, f7};
    #if PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED) && !defined(PYPY_VERSION)
        PyObject *op = tp->tp_alloc(tp, 8);
        if (op == NULL) return NULL;
        for (int i = 0; i < 8; i++) {
            Py_INCREF(fields[i]);
            PyTuple_SET_ITEM(op, i, fields[i]);
        }
        return op;
    #else
        PyObject *packed = PyTuple_New(8);
        if (packed == NULL) return NULL;
        for (int i = 0; i < 8; i++) {
            Py_INCREF(fields[i]);
            PyTuple_SET_ITEM(packed, i, fields[i]);
        }
        PyObject *args = PyTuple_Pack(1, packed);
        Py_DECREF(packed);
        if (args == NULL) return NULL;
        PyObject *op = PyTuple_Type.tp_new(tp, args, NULL);
        Py_DECREF(args);
        return op;
    #endif
    }
    """
    object ssewire_new_message(PyObject*, PyObject*, PyObject*, PyObject*, PyObject*,
                               PyObject*, PyObject*, PyObject*, PyObject*)

cdef object _loads = orjson.loads
cdef object _JSONDecodeError = orjson.JSONDecodeError
cdef object _MESSAGE_CLASS = Message
cdef object _NOTIFICATION = Kind.NOTIFICATION
cdef object _REQUEST = Kind.REQUEST
cdef object _RESPONSE = Kind.RESPONSE
cdef object _ERROR = Kind.ERROR
cdef str _MESSAGE_TYPE = "message"
cdef str _VERSION = "2.0"
cdef bytes _NOTHING = b""


cdef inline bint _an_id(object ident):
    """A string or an integer (never a bool: ``type`` is exact)."""
    return type(ident) is int or type(ident) is str


def items(list events not None, bint keep, object raw_above, object slow):
    """Each event's item, in order: the common shapes here, every other event through
    ``slow`` (the pure step)."""
    cdef list out = []
    cdef object event, event_type, data, event_id, payload, kind, ident, method, kept
    cdef object params, error
    cdef PyObject *found
    cdef object size
    for event in events:
        event_type, data, event_id, _ = event
        if event_type != _MESSAGE_TYPE or not data:
            out.append(slow(event))
            continue
        size = len(data)
        if raw_above is not None and size > raw_above:
            out.append(slow(event))  # its envelope alone is read there
            continue
        try:
            payload = _loads(data)
        except _JSONDecodeError:
            out.append(slow(event))  # the refusal, worded there
            continue
        kind = None
        if type(payload) is dict:
            found = PyDict_GetItem(payload, "jsonrpc")
            if found is not NULL and type(<object>found) is str and <object>found == _VERSION:
                found = PyDict_GetItem(payload, "method")
                if found is not NULL:
                    method = <object>found
                    if type(method) is str and "result" not in payload and "error" not in payload:
                        found = PyDict_GetItem(payload, "params")
                        params = None if found is NULL else <object>found
                        if found is NULL or type(params) is dict or type(params) is list:
                            found = PyDict_GetItem(payload, "id")
                            if found is NULL:
                                kind, ident = _NOTIFICATION, None
                            elif _an_id(<object>found):
                                kind, ident = _REQUEST, <object>found
                else:
                    method = None
                    found = PyDict_GetItem(payload, "id")
                    if found is not NULL:
                        ident = <object>found
                        if "result" in payload:
                            if "error" not in payload and _an_id(ident):
                                kind = _RESPONSE
                        elif "error" in payload:
                            error = payload["error"]
                            if (
                                type(error) is dict
                                and type(error.get("code")) is int
                                and type(error.get("message")) is str
                                and (ident is None or _an_id(ident))
                            ):
                                kind = _ERROR
        if kind is None:
            out.append(slow(event))  # not a shape of the fast path: every rule is there
            continue
        kept = data if keep else _NOTHING
        out.append(
            ssewire_new_message(
                <PyObject*>_MESSAGE_CLASS, <PyObject*>kind, <PyObject*>payload, <PyObject*>ident,
                <PyObject*>method, <PyObject*>event_type, <PyObject*>event_id, <PyObject*>size,
                <PyObject*>kept,
            )
        )
    return out
