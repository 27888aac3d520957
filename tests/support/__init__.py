"""What the tests share, in one package: the decoder twins under test (``twins``), servers
and components they start on 127.0.0.1 (``processes``, ``uvicorn_servers``, ``faultproxy``
(the one TCP proxy: cuts, delays, splits, round robin, failover), ``nginx``, ``redis_server``,
``provision``, ``sdk_servers``, ``ts_servers``, ``gateway_runs``, ``hostile_servers``), and
the cases and readings they compare against (``whatwg``, ``transcripts``,
``conformant_sessions``, ``fault_cases``, ``inbound_matrix``).
Each name says what it holds; none is named like a module of ``src/``."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout
