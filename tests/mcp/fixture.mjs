// A tiny stdio MCP server for troupe's tests, with no dependencies: what the
// reference servers cannot be made to do on cue.
//
// - It sends a log notification before it answers `initialize` (a client
//   must not take the first frame for the answer).
// - `echo {text}`: answers the text.
// - `add_tool {name}`: adds a tool and sends `notifications/tools/list_changed`.
// - `hang`: never answers (for timeouts and cancellation).
// - `cancelled`: the request ids `notifications/cancelled` named so far.
// - `die`: the process exits before answering.
// - `write_note {text}`: not read-only (for the trust gate).
// - `pid`: this process's id (a restart changes it).
//
// `FIXTURE_SILENT=1` makes it never answer anything (a server that hangs at start).
// `FIXTURE_MODERN=1` makes it speak the stateless 2026-07-28 lifecycle
// (`server/discover`, no `initialize`); otherwise it refuses `server/discover`
// as a 2025-11-25 server does.

import { createInterface } from "node:readline";

const silent = process.env.FIXTURE_SILENT === "1";
const modern = process.env.FIXTURE_MODERN === "1";
const tools = [
  { name: "echo", description: "Echoes the text back.", annotations: { readOnlyHint: true },
    inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } },
  { name: "add_tool", description: "Adds a tool named `name`.",
    inputSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] } },
  { name: "hang", description: "Never answers.", annotations: { readOnlyHint: true },
    inputSchema: { type: "object", properties: {} } },
  { name: "cancelled", description: "Lists the cancelled request ids.", annotations: { readOnlyHint: true },
    inputSchema: { type: "object", properties: {} } },
  { name: "die", description: "Exits before answering.", annotations: { readOnlyHint: true },
    inputSchema: { type: "object", properties: {} } },
  { name: "write_note", description: "Writes a note.", annotations: { destructiveHint: true },
    inputSchema: { type: "object", properties: { text: { type: "string" } } } },
  { name: "pid", description: "The server's process id.", annotations: { readOnlyHint: true },
    inputSchema: { type: "object", properties: {} } },
];
const cancelled = [];

function send(message) {
  if (modern && message.result) message.result = { resultType: "complete", ...message.result };
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");
}

function text(id, value) {
  send({ id, result: { content: [{ type: "text", text: String(value) }] } });
}

const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (silent || !line.trim()) return;
  const msg = JSON.parse(line);
  const { id, method, params } = msg;
  if (method === "notifications/cancelled") {
    cancelled.push(params.requestId);
    return;
  }
  if (id === undefined) return;
  switch (method) {
    case "server/discover":
      if (!modern) break;
      send({ id, result: {
        supportedVersions: ["2026-07-28"],
        capabilities: { tools: { listChanged: true } },
        ttlMs: 0,
        cacheScope: "public",
        _meta: { "io.modelcontextprotocol/serverInfo": { name: "troupe-fixture", version: "1.0.0" } },
      } });
      return;
    case "initialize":
      send({ method: "notifications/message", params: { level: "info", data: "starting" } });
      send({ id, result: {
        protocolVersion: "2025-11-25",
        capabilities: { tools: { listChanged: true } },
        serverInfo: { name: "troupe-fixture", version: "1.0.0" },
      } });
      return;
    case "ping":
      send({ id, result: {} });
      return;
    case "tools/list":
      send({ id, result: { tools } });
      return;
    case "tools/call": {
      const args = params.arguments || {};
      switch (params.name) {
        case "echo": return text(id, args.text);
        case "add_tool":
          tools.push({ name: args.name, description: `Added at run time: ${args.name}.`,
            inputSchema: { type: "object", properties: {} } });
          text(id, `added ${args.name}`);
          send({ method: "notifications/tools/list_changed" });
          return;
        case "hang": return;
        case "cancelled": return text(id, JSON.stringify(cancelled));
        case "die": process.exit(3);
        case "write_note": return text(id, `noted: ${args.text}`);
        case "pid": return text(id, process.pid);
        default:
          // A tool added at run time.
          if (tools.some((t) => t.name === params.name)) return text(id, `ran ${params.name}`);
          send({ id, error: { code: -32602, message: `unknown tool ${params.name}` } });
          return;
      }
    }
  }
  send({ id, error: { code: -32601, message: `method not found: ${method}` } });
});
