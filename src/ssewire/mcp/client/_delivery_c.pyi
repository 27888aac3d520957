from collections.abc import Callable, Iterable
from typing import Any

from ...jsonrpc import InvalidMessage

def progressed(requests: dict[Any, Any], stats: Any, params: Any) -> bool: ...
def deliver(
    items: Iterable[Any],
    requests: dict[Any, Any],
    stats: Any,
    route: Callable[[Any], None],
    too_large: Callable[[InvalidMessage], None] | None,
) -> int: ...
