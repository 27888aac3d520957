"""The gateway bench's upstream: the official MCP Python SDK server (the ``mcp`` package)
on 127.0.0.1, one ``countdown`` tool of the same arguments as the client bench's servers
(``count`` progress notifications, then a text result of ``size`` bytes), in sessions,
answering on SSE streams as the SDK does by default.

    python bench/sdk_upstream.py PORT
"""

from __future__ import annotations

import asyncio
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

_TEXT = "x" * (1 << 20)  # ASCII: one byte a character, so size is the result's byte size


def app() -> object:
    server = MCPServer("bench-upstream", version="0", log_level="WARNING")

    @server.tool()
    async def countdown(
        ctx: Context, count: int = 0, size: int = 10, ids: bool = True, delay: float = 0
    ) -> str:
        for i in range(1, count + 1):
            await ctx.report_progress(i, count)
            if delay:
                await asyncio.sleep(delay)
        return (_TEXT * (size // len(_TEXT) + 1))[:size]

    return server.streamable_http_app(streamable_http_path="/mcp")


if __name__ == "__main__":
    uvicorn.run(app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
