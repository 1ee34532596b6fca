#!/usr/bin/env node
// A stand-in for Claude Code's `claude auth login`, for the test of
// `delegate action: account`: it shows the URL of a browser flow, then
// writes the account's `.claude.json` (logged in as `me@example.com`) in
// `CLAUDE_CONFIG_DIR` and ends, without any network.
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const args = process.argv.slice(2);
if (args[0] !== "auth" || args[1] !== "login") {
  console.error(`fake-login: only \`auth login\`, not ${args.join(" ")}`);
  process.exit(2);
}
console.log("Opening the browser to sign in...");
console.log("If it did not open, visit: https://login.example.test/oauth/authorize?code=fake");
writeFileSync(
  join(process.env.CLAUDE_CONFIG_DIR, ".claude.json"),
  JSON.stringify({ oauthAccount: { emailAddress: "me@example.com" } }),
);
console.log("Login successful.");
