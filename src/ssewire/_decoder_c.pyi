from collections.abc import Callable

from ._events import Event

class CDecoder:
    def __init__(
        self,
        *,
        max_event_size: int | None = ...,
        max_line_size: int | None = ...,
        on_comment: Callable[[str], object] | None = ...,
    ) -> None: ...
    @property
    def last_event_id(self) -> str: ...
    @property
    def retry(self) -> int | None: ...
    @property
    def discarded(self) -> int: ...
    def feed(self, data: bytes | bytearray | memoryview) -> list[Event]: ...
    def close(self) -> list[Event]: ...
