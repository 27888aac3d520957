"""A stdio MCP server whose every move a test chooses, to see what a gateway's host sends it.

``python -m tests.support.stdio_scripted`` reads JSON-RPC lines on stdin and answers
``initialize`` (with the resources capability) and the tools below; everything it reads is
kept, and ``seen`` returns it, so a test asserts on the ids, tokens and cancellations that
reached the process, not on what the host meant to send:

- ``seen``: the messages read so far (``{"method", "id", "params"}`` each);
- ``progress``: ``count`` progress notifications under the token the request carried, then
  "done";
- ``ask``: a ``sampling/createMessage`` request to the client; its answer (or error) as text;
- ``announce``: ``notifications/tools/list_changed``, ``notifications/resources/updated`` for
  ``uri``, a log message, then "announced";
- ``garbage``: a line that is not JSON, then "after garbage";
- ``unreadable``: its answer as a line naming its id that is not JSON (invalid UTF-8 in it),
  the Python SDK's way (the id first), or with ``last`` the TypeScript SDK's (the id last);
- ``unreadable_ask``: a request to the client that is not JSON, under the call's own id (the
  server's ids are its own), then the call's answer, "answered after";
- ``hang``: never answered (a call to cancel);
- ``flood``: ``count`` pings to the client, written without reading their answers, then
  "flooded" (a host that waits to write an answer while the process waits to write the next
  ping never gets here).

``initialize`` also declares the tasks capability, which a host shared by sessions must not
pass on.

``tools/list`` comes in pages of two (the cursor is the next index), one tool's name as long as
``LONG``; ``resources/list`` lists ``scripted://note``, which ``resources/read`` reads; any
other request is refused (-32601), as a server without it would.
"""

from __future__ import annotations

import json
import sys

seen: list[dict] = []
LONG = "a_tool_whose_name_alone_is_longer_than_what_many_clients_take_0123456789"
TOOLS = ["seen", "progress", "ask", "announce", "garbage", LONG]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(id_, value: str) -> None:
    send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": value}]}})


def call(message: dict) -> None:
    params = message.get("params") or {}
    name, args, id_ = params.get("name"), params.get("arguments") or {}, message["id"]
    token = (params.get("_meta") or {}).get("progressToken")
    if name == "seen":
        text(id_, json.dumps(seen))
    elif name == "progress":
        for i in range(1, args.get("count", 2) + 1):
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": i},
                }
            )
        text(id_, "done")
    elif name == "ask":
        send(
            {
                "jsonrpc": "2.0",
                "id": "s-1",
                "method": "sampling/createMessage",
                "params": {"messages": [], "maxTokens": 1},
            }
        )
        answer = json.loads(sys.stdin.readline())
        seen.append({"method": answer.get("method"), "id": answer.get("id"), "params": answer.get("params")})
        text(id_, json.dumps(answer.get("result", answer.get("error"))))
    elif name == "announce":
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        send({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": args["uri"]}})
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
        text(id_, "announced")
    elif name == "garbage":
        sys.stdout.write("this is not json\n")
        text(id_, "after garbage")
    elif name == "unreadable":
        result = b'"result": {"content": [{"type": "text", "text": "\xff\xfe"}]}'
        if args.get("last"):
            line = b"{" + result + b', "jsonrpc": "2.0", "id": ' + json.dumps(id_).encode() + b"}"
        else:
            line = json.dumps({"jsonrpc": "2.0", "id": id_})[:-1].encode() + b", " + result + b"}"
        sys.stdout.buffer.write(line + b"\n")
        sys.stdout.flush()
    elif name == "unreadable_ask":
        head = json.dumps({"jsonrpc": "2.0", "id": id_, "method": "sampling/createMessage"})[:-1].encode()
        sys.stdout.buffer.write(head + b', "params": {"note": "\xff"}}\n')
        sys.stdout.flush()
        text(id_, "answered after")
    elif name == LONG:
        text(id_, "long one")
    elif name == "flood":
        for i in range(args.get("count", 1)):
            send({"jsonrpc": "2.0", "id": f"ping-{i}", "method": "ping"})
        text(id_, "flooded")
    elif name != "hang":
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32602, "message": f"no tool {name}"}})


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        seen.append(
            {"method": message.get("method"), "id": message.get("id"), "params": message.get("params")}
        )
        method = message.get("method")
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {
                        "protocolVersion": message["params"]["protocolVersion"],
                        "capabilities": {
                            "tools": {"listChanged": True},
                            "resources": {"subscribe": True},
                            "tasks": {"list": {}, "requests": {"tools": {"call": {}}}},
                        },
                        "serverInfo": {"name": "scripted", "version": "0"},
                    },
                }
            )
        elif method == "tools/call":
            call(message)
        elif method in ("resources/subscribe", "resources/unsubscribe", "ping"):
            send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        elif method == "tools/list":
            start = int((message.get("params") or {}).get("cursor") or 0)
            page = {
                "tools": [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS[start : start + 2]]
            }
            if start + 2 < len(TOOLS):
                page["nextCursor"] = str(start + 2)
            send({"jsonrpc": "2.0", "id": message["id"], "result": page})
        elif method == "resources/list":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {"resources": [{"uri": "scripted://note", "name": "note"}]},
                }
            )
        elif method == "resources/read":
            contents = [{"uri": "scripted://note", "text": "a note"}]
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"contents": contents}})
        elif "id" in message and method is not None:
            send(
                {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no {method}"}}
            )


if __name__ == "__main__":
    main()
