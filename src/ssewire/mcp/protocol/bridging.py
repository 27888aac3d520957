"""What differs between the revisions with sessions and the stateless one, sans-IO: the
facts a revision bridge maps (``ssewire.mcp.bridge``), each written once.

- per-request ``_meta`` keys of the stateless revision beyond `wire.META_VERSION` and
  `wire.META_CAPABILITIES` (client identity, log level; the server's identity in a result;
  the subscription a notification belongs to);
- multi round-trip requests: the methods that may answer with an input-required result, the
  server-to-client requests such a result embeds, and the parameter names of the retry;
- ``subscriptions/listen``: its filter's keys and the notification each one opts in to;
- the methods each side has that the other does not.
"""

from __future__ import annotations

from typing import Any

from .wire import META_CAPABILITIES, META_VERSION

META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"  # in a result's _meta
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"  # on a listen stream's messages
# every _meta key the stateless revision reserves on a request: what a session carries instead
RESERVED_REQUEST_META = frozenset(
    {
        META_VERSION,
        META_CAPABILITIES,
        META_CLIENT_INFO,
        META_LOG_LEVEL,
    }
)

# -- multi round-trip requests ---------------------------------------------------------
RESULT_TYPE = "resultType"
INPUT_REQUIRED = "input_required"
COMPLETE = "complete"
INPUT_REQUESTS = "inputRequests"  # in the result: key -> {"method", "params"}
INPUT_RESPONSES = "inputResponses"  # in the retry's params: key -> the client's result
REQUEST_STATE = "requestState"  # in the result, echoed verbatim in the retry's params
# the requests that may be answered with an input-required result
INPUT_REQUIRED_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
# the server-to-client requests an input-required result may embed
INPUT_REQUEST_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})


def is_input_required(result: Any) -> bool:
    return isinstance(result, dict) and result.get(RESULT_TYPE) == INPUT_REQUIRED


# -- subscriptions/listen --------------------------------------------------------------
LISTEN = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
RESOURCE_UPDATED = "notifications/resources/updated"
RESOURCE_SUBSCRIPTIONS = "resourceSubscriptions"  # the filter key: a list of resource URIs
# the filter's boolean keys, the notification each opts in to, and the server capability
# (name, flag) under which a server with sessions sends it
LIST_CHANGED = {
    "toolsListChanged": ("notifications/tools/list_changed", "tools"),
    "promptsListChanged": ("notifications/prompts/list_changed", "prompts"),
    "resourcesListChanged": ("notifications/resources/list_changed", "resources"),
}

# -- the HTTP status of an error answered as JSON under the stateless revision -----------
# (the official SDK's table: one decides the status, whichever layer made the error)
STATELESS_ERROR_STATUS = {
    -32700: 400,  # parse error
    -32600: 400,  # invalid request
    -32602: 400,  # invalid params
    -32020: 400,  # header mismatch
    -32021: 400,  # missing required client capability
    -32022: 400,  # unsupported protocol version
    -32601: 404,  # method not found
}

# -- what one side has and the other not -----------------------------------------------
# requests of the revisions with sessions that the stateless one removed, and what each
# became there (None: nothing)
REMOVED_IN_STATELESS: dict[str, str | None] = {
    "initialize": "server/discover",
    "ping": None,
    "logging/setLevel": f"the {META_LOG_LEVEL} _meta key of each request",
    "resources/subscribe": LISTEN,
    "resources/unsubscribe": LISTEN,
    "tasks/get": None,
    "tasks/list": None,
    "tasks/result": None,
    "tasks/cancel": None,
}
# requests only the stateless revision has
STATELESS_ONLY = frozenset({"server/discover", LISTEN})
