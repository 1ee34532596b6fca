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
//
// Split on "\n" only, as pi does.
import { performance } from "node:perf_hooks";

const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const now = () => Math.round((performance.timeOrigin + performance.now()) * 1000);
const origin = Math.round(performance.timeOrigin * 1000);
let buffer = "";
let aborted = false;

async function run(message) {
  const words = message.split(/\s+/);
  const at = (w) => words.indexOf(w);
  out({ type: "agent_start" });
  if (at("exit") >= 0) process.exit(Number(words[at("exit") + 1]));
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
  out({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: `done ${n}` }], usage: { input: 1, output: 1 }, stopReason: aborted ? "aborted" : "stop" } });
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
      out({ id: command.id, type: "response", command: "get_state", success: true, data: { sessionFile: null } });
    } else if (command.type === "abort") {
      aborted = true;
      out({ id: command.id, type: "response", command: "abort", success: true });
    } else {
      out({ id: command.id, type: "response", command: command.type, success: true });
    }
  }
});
process.stdin.on("end", () => process.exit(0));
