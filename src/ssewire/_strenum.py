"""``enum.StrEnum`` on every supported Python (3.10 lacks it).

Members are ``str`` s: they compare equal to their value, format as it and serialise as it
(``json``, ``orjson``), so reports and callers that hold plain strings keep working.
"""

from __future__ import annotations

import enum
import sys

if sys.version_info >= (3, 11):
    StrEnum = enum.StrEnum
else:  # pragma: no cover - exercised on 3.10 only

    class StrEnum(str, enum.Enum):
        def __str__(self) -> str:
            return str(self.value)

        __format__ = str.__format__  # type: ignore[assignment]
