"""The protocol layer, sans-IO: each wire fact of MCP Streamable HTTP written once (revision
profiles, header and ``_meta`` names, media types, request building, the handshake, header
rules, ``Retry-After``). The client, the reference server, the probe and the transcript model
ask it; nothing else spells a revision date."""
