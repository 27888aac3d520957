"""How many hypothesis examples a test runs, scaled with the loaded profile.

``conftest.py`` registers the profiles with :data:`DEFAULT_EXAMPLES`; a test that needs a
smaller budget than the profile's (an expensive example) asks for ``examples(n)``: ``n``
under the default profile, 100x that under ``SSEWIRE_HYPOTHESIS_PROFILE=long``.
"""

from __future__ import annotations

from hypothesis import settings

DEFAULT_EXAMPLES = 300


def examples(n: int) -> int:
    return max(1, n * settings().max_examples // DEFAULT_EXAMPLES)
