"""Where a stream's safe items go, a chunk at a time, pure Python: the twin of
``_delivery_c.pyx``.

A progress notification for one of the client's calls goes straight to the call's
callback (most of what a long call receives: its envelope is not looked at again), every
other message to the router, an event the decoder dropped for the size limit to the
caller. Same calls, counters and return values as the compiled twin, item for item; the
differential tests (tests/mcp/client/test_delivery.py) keep them so. The names both twins
read are defined here once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from ...jsonrpc import InvalidMessage, Message
from ..protocol.reissue import PROGRESS

log = logging.getLogger("ssewire.mcp.client")

TOKEN_PREFIX = "ssewire-p"  # the progress tokens this client hands out: the prefix, then the request id
_clock = time.monotonic  # bound once: read per progress notification


def progressed(requests: dict[Any, Any], stats: Any, params: Any) -> bool:
    """Progress for one of the calls in ``requests`` (a ``_Pending`` by id and token):
    handed to its callback, or, the call having ended, dropped and counted
    (``late_progress``). False when the token is not one this client handed out (such
    progress is a notification like any other)."""
    token = params.get("progressToken") if type(params) is dict else None
    if type(token) is not str:
        return False  # not a token of this client's
    record = requests.get(token)
    if record is None or record.token != token or (on_progress := record.on_progress) is None:
        if token.startswith(TOKEN_PREFIX):  # one of ours: its call ended
            stats.late_progress += 1
            return True
        return False  # not a token of this client's
    if not record.progress.passes(params.get("progress"), record.reissued):
        stats.repeated_progress += 1  # a re-issue's run catching up: delivered once already
        return True
    record.times.append(_clock())
    try:
        on_progress(params)
    except Exception:  # the caller's callback failed: its bug, not the stream's; say so
        stats.callback_errors += 1
        log.exception("a progress callback raised")
    return True


def deliver(
    items: Iterable[Any],
    requests: dict[Any, Any],
    stats: Any,
    route: Callable[[Any], None],
    too_large: Callable[[InvalidMessage], None] | None,
) -> int:
    """Each of a chunk's safe items where it goes, in order: progress to its call
    (`progressed`), any other message's payload to ``route``, an event dropped for the size
    limit to ``too_large`` (when given). Returns the messages delivered."""
    delivered = 0
    for item in items:
        if item.__class__ is Message:
            delivered += 1
            if item.method != PROGRESS or not progressed(requests, stats, item.payload.get("params")):
                route(item.payload)
        elif (
            too_large is not None and isinstance(item, InvalidMessage) and item.reason.startswith("too large")
        ):
            too_large(item)
    return delivered
