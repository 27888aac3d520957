from collections.abc import Callable

from ._events import RawEvent
from ._items import Item

def items(
    events: list[RawEvent], keep: bool, raw_above: int | None, slow: Callable[[RawEvent], Item]
) -> list[Item]: ...
