"""An MCP server on the official Python SDK's stdio transport: what a gateway's stdio route runs.

``python -m tests.support.stdio_server`` speaks newline-delimited JSON-RPC on its stdin and
stdout (``MCPServer.run("stdio")``), with the tools the stdio route's tests call:

- ``echo`` returns its text; ``whoami`` the process id (a restart shows as a new one);
- ``countdown`` reports ``count`` progress notifications, then "done" (a long one keeps
  a call in flight while another session calls);
- ``big`` returns ``size`` characters (a line over the route's message limit);
- ``crash`` ends the process at once, mid-call (``os._exit``), as a server that dies does.
"""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import Context, MCPServer


def server() -> MCPServer:
    app = MCPServer("ssewire-stdio-target", version="0", log_level="WARNING")

    @app.tool()
    def echo(text: str) -> str:
        return text

    @app.tool()
    def whoami() -> str:
        return str(os.getpid())

    @app.tool()
    async def countdown(ctx: Context, count: int = 3, delay: float = 0.01) -> str:
        for i in range(1, count + 1):
            await asyncio.sleep(delay)
            await ctx.report_progress(i, count)
        return "done"

    @app.tool()
    def big(size: int) -> str:
        return "x" * size

    @app.tool()
    def crash() -> str:
        os._exit(3)

    return app


if __name__ == "__main__":
    server().run("stdio")
