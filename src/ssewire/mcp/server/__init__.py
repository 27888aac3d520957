"""The downstream-server core shared by the reference server and the gateway: what an MCP
server does before and around its methods, written once (the ASGI answers and the body read
under a limit, the bounded event log and its follower, the session table)."""
