"""``python -m ssewire``: the same as the ``ssewire`` command."""

import sys

from .cli import main

sys.exit(main())
