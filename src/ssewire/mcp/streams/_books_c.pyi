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
) -> tuple[list[Any], EventVerdict | None]: ...
def disown(table: dict[Any, tuple[Any, int]], keys: list[Any], root: Any) -> None: ...
