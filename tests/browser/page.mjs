// Drives troupe's web page in a real Chromium, as a person would:
// sign in, open a thread, post, watch a scripted bot's answer stream in,
// approve its command, upload a file and see it listed. A screenshot of
// each step goes to the artifact folder. Run by tests/suite/web_page.rs:
//
//   node tests/browser/page.mjs BASE_URL TOKEN ARTIFACT_DIR
//
// Exits 0 when every step passed; otherwise prints the step that failed.
import { chromium } from "playwright-core";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [base, token, artifacts] = process.argv.slice(2);
mkdirSync(artifacts, { recursive: true });
const executablePath = process.env.TROUPE_CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({
  executablePath,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
let step = "start";
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
const transferred = [];
page.on("response", async (r) => {
  try { transferred.push((await r.body()).length); } catch (_) { /* a socket */ }
});
const shot = (name) => page.screenshot({ path: join(artifacts, name + ".png"), fullPage: true });
const wait = { timeout: 20000 };
try {
  step = "the sign-in page";
  await page.goto(base + "/");
  await page.getByLabel("Token").waitFor(wait);
  const firstLoad = transferred.reduce((a, b) => a + b, 0);
  await shot("1-sign-in");

  step = "a wrong token is refused";
  await page.getByLabel("Token").fill("troupe_wrong");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByText("unknown or revoked").waitFor(wait);

  step = "signing in";
  await page.getByLabel("Token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByText("(@ada)").waitFor(wait);
  await page.getByRole("button", { name: /general/ }).waitFor(wait);
  await page.getByText("listens to all").waitFor(wait);
  await shot("2-house");

  step = "opening the thread";
  await page.getByRole("button", { name: /general/ }).click();
  await page.getByRole("heading", { name: "general" }).waitFor(wait);

  step = "posting with a mention";
  await page.getByRole("button", { name: /^alice/ }).click();
  const box = page.getByLabel(/^Message \(@handle/);
  if (!(await box.inputValue()).startsWith("@alice")) throw new Error("clicking a member did not mention them");
  await box.fill("@alice please clean the build");
  await page.getByRole("button", { name: "Post", exact: true }).click();
  await page.locator("#messages li", { hasText: "please clean the build" }).waitFor(wait);

  step = "the bot's tool call, folded";
  await page.locator("details.tool summary", { hasText: "run_command" }).waitFor(wait);

  step = "answering the approval";
  await page.getByRole("button", { name: "Approve once" }).waitFor(wait);
  await shot("3-approval");
  await page.getByRole("button", { name: "Approve once" }).click();

  step = "the bot's answer streams in";
  await page.locator("#messages li.bot", { hasText: "cleaned up" }).waitFor(wait);
  await page.locator("#messages li.bot details.tool").first().waitFor(wait);
  await page.locator("#messages li.bot a.link", { hasText: "→ thread" }).waitFor(wait);
  await shot("4-answer");

  step = "opening the thread the bot made, through its link";
  await page.locator("#messages li.bot a.link").first().click();
  await page.getByRole("heading", { name: "cleanup-log" }).waitFor(wait);

  step = "uploading a file";
  await page.getByLabel("Upload a file").setInputFiles({
    name: "notes.md", mimeType: "text/markdown", buffer: Buffer.from("# notes\nhello house\n"),
  });
  await page.getByLabel("File message").fill("first notes");
  await page.getByRole("button", { name: "Upload", exact: true }).click();
  await page.locator("#files li", { hasText: "notes.md" }).waitFor(wait);
  await shot("5-files");

  writeFileSync(join(artifacts, "result.json"), JSON.stringify({ ok: true, first_load_bytes: firstLoad }));
  console.log(JSON.stringify({ ok: true, first_load_bytes: firstLoad }));
  await browser.close();
} catch (e) {
  await shot("failed").catch(() => {});
  console.error("web page: " + step + ": " + e.message);
  await browser.close();
  process.exit(1);
}
