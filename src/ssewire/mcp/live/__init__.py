"""The I/O part of ``ssewire.mcp``: what talks to real servers.

Only this subpackage may import httpx, asyncio, socket or uvicorn (an import contract
checked in CI). It holds no rules or protocol facts of its own: it records and drives, and
the sans-IO part (model, ledger, rules) judges.
"""
