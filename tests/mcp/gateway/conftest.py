"""The upstream every gateway test relays to: the reference server, with room to resume
long calls (4,096 events a stream)."""

import pytest

from ssewire.mcp.transport.serving import running
from tests.support.resets import reference_server


@pytest.fixture(scope="module")
def upstream():
    with running(reference_server(store_size=4096)) as root:
        yield root + "/mcp"
