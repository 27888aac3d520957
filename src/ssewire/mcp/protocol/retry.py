"""``Retry-After`` (RFC 9110 10.2.3): a number of seconds or an HTTP date."""

from __future__ import annotations

import email.utils
import time


def retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait, never negative (a date in the past is 0); None when the field is
    absent or unreadable, so that each caller states its own default."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # str.isdigit admits '²', which float() refuses
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; an obsolete form may come without a zone
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
