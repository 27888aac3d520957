"""The old module paths of ssewire.mcp (before the layout by component) keep working for one
release: each warns, naming its new home, and hands out the very same objects."""

import importlib
import sys

import pytest

MOVED = [
    ("ssewire.mcp.live.client", "Client", "ssewire.mcp.client.session"),
    ("ssewire.mcp.live.transport", "send", "ssewire.mcp.transport.http"),
    ("ssewire.mcp.live.record", "Recorder", "ssewire.mcp.transport.record"),
    ("ssewire.mcp.live.asgi_http", "read_body", "ssewire.mcp.server.asgi"),
    ("ssewire.mcp.live.server", "ReferenceServer", "ssewire.mcp.reference.server"),
    ("ssewire.mcp.live.server", "running", "ssewire.mcp.transport.serving"),
    ("ssewire.mcp.live.faults", "Fault", "ssewire.mcp.reference.faults"),
    ("ssewire.mcp.live.probe", "run_probe", "ssewire.mcp.probe.driver"),
    ("ssewire.mcp.live.stores", "MemoryStore", "ssewire.mcp.gateway.stores"),
    ("ssewire.mcp.live.redis_store", "RedisStore", "ssewire.mcp.gateway.stores.redis"),
    ("ssewire.mcp.probes", "CHECKS", "ssewire.mcp.probe.checks"),
    ("ssewire.mcp.redact", "redact", "ssewire.mcp.transcript.redact"),
    ("ssewire.mcp.validator.report", "load_baseline", "ssewire.mcp.validator.baseline"),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED, ids=[f"{old}.{name}" for old, name, _ in MOVED])
def test_an_old_path_warns_and_gives_the_same_object(old, name, new):
    sys.modules.pop(old, None)  # the warning comes at import: import it afresh
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)


def test_an_old_path_does_not_invent_names():
    sys.modules.pop("ssewire.mcp.live.client", None)
    with pytest.warns(DeprecationWarning):
        module = importlib.import_module("ssewire.mcp.live.client")
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        module.Nothing  # noqa: B018
