// A stand-in for pi that speaks its RPC mode without calling any model:
// the benchmark (`troupe bench executors`) measures troupe's side with it,
// and the tests use it for a harness that misbehaves. The prompt says what
// to do, in words:
//
//   events N [every MS]   N tool_execution_start events (each carrying its
//                         number, the wall time its process started and the
//                         wall time it was written, in µs: `step N o=… t=…`),
//                         then an assistant message and agent_end
//   garbage               lines that are not JSON, then a normal end
//   flood                 one line of 9 MiB with no end
//   hang                  nothing at all
//   exit N                exit with code N at once
//   touch NAME            write the file NAME in its folder first
//   limit-in WORD         when its --session-dir holds WORD: its model
//                         call fails at the plan's usage limit (the ChatGPT
//                         backend's 429 body, resetting in an hour, with
//                         the wall time it was written, in µs, as `t`)
//   cost USD              its last message's usage says it cost USD
//                         (`usage.cost.total`, as pi's is)
//
// It keeps a session file in its --session-dir (named by get_state), a line
// per prompt, so a session copied to another account's folder is seen.
// Split on "\n" only, as pi does.
import { performance } from "node:perf_hooks";
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const now = () => Math.round((performance.timeOrigin + performance.now()) * 1000);
const origin = Math.round(performance.timeOrigin * 1000);
let buffer = "";
let aborted = false;
// Resolved once it has said where its session is (troupe asks with
// get_state, perhaps after the prompt): a limit waits for it, so the
// session is on record before the limit is.
let stated;
const stateSaid = new Promise((r) => (stated = r));
// Run bare (the benchmark's first legs) it is given no --session-dir, and
// keeps no session.
const flag = (name) => (process.argv.indexOf(name) >= 0 ? process.argv[process.argv.indexOf(name) + 1] : null);
const sessions = flag("--session-dir");
const resumed = flag("--session");
const session = resumed ?? (sessions === null ? null : join(sessions, "fake-session.jsonl"));

async function run(message) {
  const words = message.split(/\s+/);
  const at = (w) => words.indexOf(w);
  out({ type: "agent_start" });
  if (at("exit") >= 0) process.exit(Number(words[at("exit") + 1]));
  if (session !== null) {
    if (sessions !== null) mkdirSync(sessions, { recursive: true });
    appendFileSync(session, JSON.stringify({ prompt: message, sessions }) + "\n");
  }
  if (at("touch") >= 0) writeFileSync(words[at("touch") + 1], "touched\n");
  if (at("hang") >= 0) return;
  if (at("flood") >= 0) {
    process.stdout.write("x".repeat(9 * 1024 * 1024));
    return;
  }
  if (at("garbage") >= 0) {
    process.stdout.write("this is not json\n{\"half\": \n");
  }
  const n = at("events") >= 0 ? Number(words[at("events") + 1]) : 0;
  const every = at("every") >= 0 ? Number(words[at("every") + 1]) : 0;
  for (let i = 1; i <= n && !aborted; i++) {
    out({ type: "tool_execution_start", toolCallId: `c${i}`, toolName: "bash", args: { command: `step ${i} o=${origin} t=${now()}` } });
    if (every > 0) await new Promise((r) => setTimeout(r, every));
    else if (i % 256 === 0) await new Promise((r) => setImmediate(r));
  }
  if (at("limit-in") >= 0 && (sessions ?? "").includes(words[at("limit-in") + 1])) {
    // Its state answer goes first, as a real model call takes a while.
    await stateSaid;
    const resets = Math.floor(Date.now() / 1000) + 3600;
    const body = { error: { type: "usage_limit_reached", message: "The usage limit has been reached", resets_at: resets }, t: now() };
    out({ type: "message_end", message: { role: "assistant", content: [], usage: { input: 7, output: 0 }, stopReason: "error", errorMessage: `429 ${JSON.stringify(body)}` } });
    out({ type: "agent_end", messages: [] });
    return;
  }
  const usage = { input: 1, output: 1 };
  if (at("cost") >= 0) usage.cost = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: Number(words[at("cost") + 1]) };
  out({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: `done ${n}` }], usage, stopReason: aborted ? "aborted" : "stop" } });
  out({ type: "agent_end", messages: [] });
}

process.stdin.on("data", (chunk) => {
  buffer += chunk.toString("utf8");
  let nl;
  while ((nl = buffer.indexOf("\n")) >= 0) {
    const line = buffer.slice(0, nl);
    buffer = buffer.slice(nl + 1);
    const command = JSON.parse(line);
    if (command.type === "prompt") {
      out({ id: command.id, type: "response", command: "prompt", success: true });
      run(command.message);
    } else if (command.type === "get_state") {
      out({ id: command.id, type: "response", command: "get_state", success: true, data: { sessionFile: session } });
      stated();
    } else if (command.type === "abort") {
      aborted = true;
      out({ id: command.id, type: "response", command: "abort", success: true });
    } else {
      out({ id: command.id, type: "response", command: command.type, success: true });
    }
  }
});
process.stdin.on("end", () => process.exit(0));
