#!/usr/bin/env node
// A stand-in for Codex's `codex exec --json … -- PROMPT`, for the tests of
// a task handed from another harness: it writes the prompt it was given to
// `received.txt` in its folder and prints the events of one turn that
// added that file and said so, without calling any model.
import { writeFileSync } from "node:fs";

const args = process.argv.slice(2);
const prompt = args[args.indexOf("--") + 1] ?? "";
writeFileSync("received.txt", prompt);
const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");
out({ type: "thread.started", thread_id: "fake-thread-1" });
out({ type: "turn.started" });
out({ type: "item.completed", item: { id: "i1", type: "file_change", changes: [{ path: "received.txt", kind: "add" }], status: "completed" } });
out({ type: "item.completed", item: { id: "i2", type: "agent_message", text: "took over from the packet" } });
out({ type: "turn.completed", usage: { input_tokens: 3, output_tokens: 2 } });
