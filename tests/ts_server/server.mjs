// The official MCP TypeScript SDK's Streamable HTTP server, as its documentation sets it up,
// for the probe's, the client's and the gateway's tests. Binds 127.0.0.1 on a free port (or
// --port N), prints {"port": N} on stdout, and exits when stdin closes (the test's process
// ends it either way).
//
// --json-listen: 2026-07-28 requests are answered by hand, as the conformance suite's own
// TypeScript fixture answers them on this SDK (which has no such revision): server/discover,
// the tool test_trigger_tool_change, and subscriptions/listen as an application/json body
// held open, one JSON-RPC message a line (no event stream), which the suite reads.
//
//   node server.mjs [--stateless] [--json] [--store] [--json-listen] [--port N]
import http from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CreateMessageResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

// size characters, multi-byte ones among them, so a cut can fall inside one
const textOfSize = (size) => "résumé ✓ ".repeat(Math.floor(size / 9) + 1).slice(0, size);

const argv = process.argv.slice(2);
const args = new Set(argv);
const port = argv.includes("--port") ? Number(argv[argv.indexOf("--port") + 1]) : 0;
const stateless = args.has("--stateless");
const json = args.has("--json");
const withStore = args.has("--store");
const jsonListen = args.has("--json-listen");

// The SDK ships the EventStore interface; resumption needs one. Bounded: 10,000 events.
class MemoryEventStore {
  constructor() {
    this.events = new Map();
  }
  async storeEvent(streamId, message) {
    const id = `${streamId}_${this.events.size + 1}`;
    this.events.set(id, { streamId, message });
    if (this.events.size > 10000) this.events.delete(this.events.keys().next().value);
    return id;
  }
  async getStreamIdForEventId(eventId) {
    return this.events.get(eventId)?.streamId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const found = this.events.get(lastEventId);
    if (!found) return "";
    let after = false;
    for (const [id, { streamId, message }] of this.events) {
      if (id === lastEventId) after = true;
      else if (after && streamId === found.streamId) await send(id, message);
    }
    return found.streamId;
  }
}

function mcpServer() {
  const server = new McpServer({ name: "ssewire-ts-probe-target", version: "0" });
  server.registerTool(
    "countdown",
    {
      description: "progress notifications, then a result (size characters, or done)",
      inputSchema: { count: z.number().optional(), size: z.number().optional(), delay: z.number().optional() },
    },
    async ({ count = 20, size = 0, delay = 0.02 }, extra) => {
      const token = extra._meta?.progressToken;
      for (let i = 1; i <= count; i++) {
        await new Promise((resolve) => setTimeout(resolve, delay * 1000));
        if (token !== undefined) {
          await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: i, total: count } });
        }
      }
      return { content: [{ type: "text", text: size ? textOfSize(size) : "done" }] };
    },
  );
  server.registerTool(
    "ask",
    { description: "asks the client for a sampling answer", inputSchema: { question: z.string() } },
    async ({ question }, extra) => {
      const reply = await extra.sendRequest(
        {
          method: "sampling/createMessage",
          params: { messages: [{ role: "user", content: { type: "text", text: question } }], maxTokens: 16 },
        },
        CreateMessageResultSchema,
      );
      return { content: [{ type: "text", text: reply.content.text }] };
    },
  );
  server.registerTool(
    "structured",
    { description: "structured content", inputSchema: { n: z.number().optional() }, outputSchema: { value: z.number() } },
    async ({ n = 1 }) => ({ content: [{ type: "text", text: JSON.stringify({ value: n }) }], structuredContent: { value: n } }),
  );
  return server;
}

const sessions = new Map(); // session id -> transport
const store = withStore ? new MemoryEventStore() : undefined;

async function readBody(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > 1 << 20) throw new Error("body too large");
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : undefined;
}

function refuse(res, status, message) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

const MODERN = "2026-07-28";
const SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId";
const listens = new Set(); // the open subscriptions/listen answers: { tools, line }

function answer(res, status, message) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(message));
}

// --json-listen: one 2026-07-28 request, answered without the SDK
function modern(res, { id = null, method, params = {} } = {}) {
  const result = (body) => answer(res, 200, { jsonrpc: "2.0", id, result: { resultType: "complete", ...body } });
  if (method === "server/discover") {
    return result({
      supportedVersions: [MODERN],
      capabilities: { tools: { listChanged: true } },
      _meta: { "io.modelcontextprotocol/serverInfo": { name: "ssewire-ts-probe-target", version: "0" } },
    });
  }
  if (method === "subscriptions/listen") {
    const tools = params.notifications?.toolsListChanged === true;
    res.writeHead(200, { "Content-Type": "application/json", "Cache-Control": "no-cache" });
    const line = (notification, fields = {}) => {
      const message = { jsonrpc: "2.0", method: notification, params: { ...fields, _meta: { [SUBSCRIPTION]: id } } };
      res.write(JSON.stringify(message) + "\n");
    };
    line("notifications/subscriptions/acknowledged", { notifications: tools ? { toolsListChanged: true } : {} });
    const listen = { tools, line };
    listens.add(listen);
    res.on("close", () => listens.delete(listen));
    return;
  }
  if (method === "tools/call" && params.name === "test_trigger_tool_change") {
    for (const listen of listens) if (listen.tools) listen.line("notifications/tools/list_changed");
    return result({ content: [{ type: "text", text: "tools changed" }] });
  }
  return answer(res, 404, { jsonrpc: "2.0", id, error: { code: -32601, message: `Method not found: ${method}` } });
}

const httpServer = http.createServer(async (req, res) => {
  try {
    if (new URL(req.url, "http://localhost").pathname !== "/mcp") return refuse(res, 404, "not found");
    const body = req.method === "POST" ? await readBody(req) : undefined;
    if (jsonListen && req.method === "POST" && req.headers["mcp-protocol-version"] === MODERN) {
      return modern(res, body);
    }
    if (stateless) {
      if (req.method !== "POST") return refuse(res, 405, "Method not allowed.");
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: json });
      const server = mcpServer();
      res.on("close", () => {
        transport.close();
        server.close();
      });
      await server.connect(transport);
      return await transport.handleRequest(req, res, body);
    }
    const sid = req.headers["mcp-session-id"];
    let transport = sid ? sessions.get(sid) : undefined;
    if (!transport && !sid && req.method === "POST" && body?.method === "initialize") {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: json,
        eventStore: store,
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
      await mcpServer().connect(transport);
    }
    if (!transport) {
      return sid ? refuse(res, 404, "Session not found") : refuse(res, 400, "Bad Request: No valid session ID provided");
    }
    await transport.handleRequest(req, res, body);
  } catch (error) {
    if (!res.headersSent) refuse(res, 400, String(error));
  }
});

httpServer.listen(port, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ port: httpServer.address().port }) + "\n");
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
