from typing import Any

from .verdicts import EventVerdict

def book(
    ledger: Any,
    stream: Any,
    chain: Any,
    id_owners: dict[Any, Any],
    message_owners: dict[Any, Any],
    batch: Any,
    book_repeats: bool,
) -> list[EventVerdict]: ...
