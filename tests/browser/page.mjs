// Drives troupe's web page in a real Chromium, as a person would:
// sign in, open a thread, post, watch a scripted bot's answer stream in
// as Markdown, approve its command, reload and find the tool folds, send
// with Enter, see a failed turn's reason, lose the server and get it back,
// see a bot's GIF, pin the thread, follow a deep link, look at 375 px and
// in dark mode, upload a file and see it listed, complete an @mention and
// recall the last message with ↑; the owner (a person of the house `home`)
// adds a person whose new token signs in, while the server runs; axe-core
// finds no serious violation and no skipped heading level on any view. A screenshot of each step goes to
// the artifact folder; the figures (first load, rendering a thread of 1,000
// messages, axe's findings) are printed as the last line, in JSON.
// Run by tests/suite/web_page.rs:
//
//   node tests/browser/page.mjs BASE_URL TOKEN OWNER_TOKEN ARTIFACT_DIR
//
// It asks the test to stop and start the server by printing
// `ask: stop the server` / `ask: start the server` and waits for `done`
// on its input. Exits 0 when every step passed; otherwise prints the step
// that failed.
import { chromium } from "playwright-core";
import { createInterface } from "node:readline";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [base, token, ownerToken, artifacts] = process.argv.slice(2);
const axeSource = readFileSync(new URL("./node_modules/axe-core/axe.min.js", import.meta.url), "utf8");
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
// What crossed the wire (compressed), not what the page decoded.
page.on("requestfinished", async (r) => {
  try { transferred.push((await r.sizes()).responseBodySize); } catch (_) { /* a socket */ }
});
const shot = (name) => page.screenshot({ path: join(artifacts, name + ".png"), fullPage: true });
const wait = { timeout: 20000 };
const lines = createInterface({ input: process.stdin });
const replies = lines[Symbol.asyncIterator]();
async function ask(what) {
  console.log("ask: " + what);
  const { value } = await replies.next();
  if (value !== "done") throw new Error("the test did not " + what);
}
const expect = (ok, what) => { if (!ok) throw new Error(what); };
// axe-core on what `p` shows now: no serious or critical violation, and no
// heading that skips a level (`heading-order`, moderate).
const axeFound = [];
async function axe(p, what) {
  if (!(await p.evaluate(() => Boolean(window.axe)))) await p.evaluate(axeSource + ";0");
  const { violations } = await p.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  axeFound.push({ what, violations: violations.map((v) => v.id + " (" + v.impact + ")") });
  const bad = violations.filter((v) => v.impact === "serious" || v.impact === "critical" || v.id === "heading-order");
  expect(!bad.length, what + ": axe-core finds " + bad.map((v) => v.id + " (" + v.impact + ") at "
    + v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join("; ")).join(", "));
}
const inView = async (locator) => {
  const box = await locator.boundingBox();
  const view = page.viewportSize();
  return box && box.y >= 0 && box.y + box.height <= view.height && box.x >= 0 && box.x + box.width <= view.width;
};
try {
  step = "the sign-in page";
  await page.goto(base + "/");
  await page.getByLabel("Token").waitFor(wait);
  const firstLoad = transferred.reduce((a, b) => a + b, 0);
  await shot("1-sign-in");
  await axe(page, "the sign-in page");

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

  step = "the bot's answer streams in, as Markdown";
  const answer = page.locator("#messages li.bot", { hasText: "cleaned up" });
  await answer.waitFor(wait);
  await page.locator("#messages li.bot details.tool").first().waitFor(wait);
  await page.locator("#messages li.bot a.link", { hasText: "→ thread" }).waitFor(wait);
  await answer.getByRole("heading", { name: "Cleaned up" }).waitFor(wait);
  await answer.locator("strong", { hasText: "gone" }).waitFor(wait);
  await answer.locator("table td", { hasText: "done" }).waitFor(wait);
  await answer.locator("pre code", { hasText: "rm -rf ./build" }).waitFor(wait);
  await answer.getByRole("button", { name: "Copy code" }).waitFor(wait);
  const docs = answer.getByRole("link", { name: "the docs" });
  expect(await docs.getAttribute("href") === "https://example.com/docs", "the link's address");
  expect(await docs.getAttribute("target") === "_blank", "the link opens a new tab");
  expect((await docs.getAttribute("rel")).includes("noopener"), "the link has rel=noopener");
  expect(await answer.locator('a[href^="javascript"]').count() === 0, "a javascript: link was made");
  await answer.locator("span.mention", { hasText: "@ada" }).waitFor(wait);
  const chip = answer.locator("a.chip", { hasText: "# general" });
  await chip.waitFor(wait);
  expect(await chip.getAttribute("target") === null, "a thread link opens in this tab");
  await shot("4-answer");

  step = "a reload keeps the thread and its tool folds";
  expect(page.url().endsWith("#/h/acme/t/general"), "the address names the thread: " + page.url());
  await page.reload();
  await page.getByRole("heading", { name: "general" }).waitFor(wait);
  const folds = page.locator("#messages li.bot", { hasText: "cleaned up" }).locator("details.tool");
  await folds.first().waitFor(wait);
  expect(await folds.count() === 2, "two folds after the reload, not " + await folds.count());
  const run = folds.filter({ hasText: "run_command" });
  await run.locator("summary").click();
  await run.locator("pre", { hasText: "exit 0" }).waitFor(wait);
  expect(await page.getByText("untrusted_tool_result").count() === 0, "the untrusted block shows");
  await shot("5-reloaded");

  step = "Enter sends, Shift+Enter adds a line, a <script> stays text";
  await page.getByText("Enter to send · Shift+Enter for a new line").waitFor(wait);
  await box.click();
  await box.pressSequentially("first <script>window.pwned=1</script>");
  await box.press("Shift+Enter");
  await box.pressSequentially("second <img src=x onerror=\"window.pwned=2\">");
  expect((await box.inputValue()).includes("\n"), "Shift+Enter did not add a line");
  await box.press("Enter");
  const mine = page.locator("#messages li.human", { hasText: "window.pwned=1" });
  await mine.waitFor(wait);
  expect(await box.inputValue() === "", "the box was not emptied");
  expect(await mine.locator("br").count() === 1, "the two lines are not two lines");
  expect(await mine.locator("script, img").count() === 0, "the message made elements");
  expect(await page.evaluate(() => window.pwned) === undefined, "the message ran script");

  step = "a failed turn says why";
  await page.locator("#messages li.bot .failed", { hasText: "did not finish" }).waitFor(wait);
  await shot("6-failed-turn");
  await axe(page, "a thread with answers, folds and a failed turn");

  step = "@-completion of members, ↑ recalls the last message sent";
  await box.fill("");
  await box.pressSequentially("thanks @al");
  const option = page.getByRole("option", { name: /@alice/ });
  await option.waitFor(wait);
  await shot("6-completion");
  await box.press("Enter");
  expect(await box.inputValue() === "thanks @alice ", "Enter did not take the completion: " + await box.inputValue());
  await page.getByRole("listbox").waitFor({ state: "hidden", ...wait });
  await box.fill("");
  await box.press("ArrowUp");
  expect((await box.inputValue()).startsWith("first <script>"), "↑ did not bring back the last message: " + await box.inputValue());
  await box.fill("");

  step = "the server goes away: a banner, a post kept";
  await ask("stop the server");
  await page.locator("#banner", { hasText: "reconnecting" }).waitFor(wait);
  await box.fill("sent after all");
  await box.press("Enter");
  await page.locator("#post-error", { hasText: "Not sent" }).waitFor(wait);
  expect(await box.inputValue() === "sent after all", "the text was not kept");
  expect(await inView(page.locator("#banner")), "the banner is out of view");
  await shot("7-server-down");

  step = "the server comes back: the banner clears, what was missed appears";
  await ask("start the server");
  await page.locator("#messages li", { hasText: "missed while away" }).waitFor(wait);
  await page.locator("#messages li.bot", { hasText: "noted while you were away" }).waitFor(wait);
  await page.locator("#banner", { hasText: "reconnecting" }).waitFor({ state: "hidden", ...wait });
  await page.getByRole("button", { name: "Retry" }).click();
  await page.locator("#messages li.human", { hasText: "sent after all" }).waitFor(wait);
  await page.locator("#post-error").waitFor({ state: "hidden", ...wait });
  await page.locator("#messages li.bot", { hasText: "welcome back" }).waitFor(wait);

  step = "a bot's GIF is a message with its image and who provides it";
  await box.fill("@alice a happy dance please");
  await box.press("Enter");
  const gif = page.locator("#messages li.bot figure.attachment");
  await gif.waitFor(wait);
  const img = gif.locator("img");
  expect((await img.getAttribute("src")).endsWith("/media/happy.gif"), "the GIF's address: " + await img.getAttribute("src"));
  expect(await img.getAttribute("alt") === "Happy Dance GIF", "the GIF's alternative text");
  expect(await img.getAttribute("width") === "480" && await img.getAttribute("height") === "270", "the GIF's size");
  const credit = gif.getByRole("link", { name: "Powered by GIPHY" });
  expect((await credit.getAttribute("href")).startsWith("https://giphy.com/gifs/"), "the attribution links to the GIF's page");
  await page.locator("#messages li.bot", { hasText: "there you go" }).waitFor(wait);
  expect(await page.locator("#messages li.bot figure.attachment").count() === 1, "the GIF shows once");
  await shot("8-gif");

  step = "pinning the thread";
  await page.getByRole("button", { name: "Pin", exact: true }).click();
  await page.getByRole("button", { name: "Unpin", exact: true }).waitFor(wait);
  await page.locator('#threads button[data-thread="general"]', { hasText: "pinned: general" }).waitFor(wait);

  step = "an unread mark on the other thread";
  await page.locator('#threads button[data-thread="notes"] .unread', { hasText: "1" }).waitFor(wait);
  await shot("8-back");

  step = "a deep link opens its thread, after signing in";
  const other = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await other.goto(base + "/#/h/acme/t/notes");
  await other.getByLabel("Token").fill(token);
  await other.getByRole("button", { name: "Sign in" }).click();
  await other.getByRole("heading", { name: "notes" }).waitFor(wait);
  await other.locator("#messages li", { hasText: "a note to read later" }).waitFor(wait);
  await other.close();

  step = "375 px: the thread first, the composer in view";
  await page.setViewportSize({ width: 375, height: 740 });
  await page.locator("#messages li.bot", { hasText: "welcome back" }).scrollIntoViewIfNeeded();
  expect(await inView(box), "the composer is out of view at 375 px");
  expect(await inView(page.getByRole("button", { name: "Post", exact: true })), "Post is out of view at 375 px");
  const threadTop = (await page.locator("#thread").boundingBox()).y;
  expect(threadTop < (await page.locator("#nav").boundingBox()).y, "the thread list comes before the thread");
  expect(threadTop < 120, "the thread starts " + threadTop + " px down");
  await page.screenshot({ path: join(artifacts, "9-narrow.png") });
  await page.setViewportSize({ width: 1280, height: 800 });

  step = "dark mode follows the system";
  await page.emulateMedia({ colorScheme: "dark" });
  const dark = await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
  expect(dark === "rgb(23, 23, 27)", "the background in dark mode is " + dark);
  await shot("10-dark");
  await axe(page, "a thread in dark mode");
  await page.emulateMedia({ colorScheme: "light" });

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
  await shot("11-files");

  step = "the owner adds a person, whose new token signs in while the server runs";
  const house = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await house.goto(base + "/");
  await house.getByLabel("Token").fill(ownerToken);
  await house.getByRole("button", { name: "Sign in" }).click();
  await house.getByRole("button", { name: "Manage" }).click();
  await house.getByRole("heading", { name: "People of every house" }).waitFor(wait);
  await house.locator('#people section[aria-label="House acme"]', { hasText: "@ada" }).waitFor(wait);
  await house.locator("#person-house").selectOption("acme");
  await house.getByLabel("Handle", { exact: true }).fill("carol");
  await house.getByLabel("Display name", { exact: true }).fill("Carol");
  await house.getByRole("button", { name: "Add and issue a token" }).click();
  const secret = (await house.locator("#secret-value").textContent({ timeout: 20000 })).trim();
  expect(secret.startsWith("troupe_"), "the new token: " + secret);
  await house.locator('#people section[aria-label="House acme"] li', { hasText: "@carol" }).waitFor(wait);
  await house.locator("#bots li", { hasText: "alice" }).waitFor(wait);
  await house.locator("#tree li", { hasText: "conversations" }).first().waitFor(wait);
  await house.locator("#usage svg rect, #usage .muted").first().waitFor(wait);
  await house.getByLabel("Listen mode of @alice in acme").selectOption("mentions");
  await house.locator("#owner-status", { hasText: "listens to mentions in acme" }).waitFor(wait);
  await house.screenshot({ path: join(artifacts, "12-owner.png"), fullPage: true });
  await axe(house, "the owner's views");
  const carol = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await carol.goto(base + "/");
  await carol.getByLabel("Token").fill(secret);
  await carol.getByRole("button", { name: "Sign in" }).click();
  await carol.getByText("(@carol)").waitFor(wait);
  await carol.getByRole("button", { name: /general/ }).click();
  await carol.locator("#messages li", { hasText: "welcome back" }).waitFor(wait);
  expect(await carol.getByRole("button", { name: "Manage" }).isHidden(), "a person of acme sees the owner's views");
  await carol.screenshot({ path: join(artifacts, "13-new-person.png"), fullPage: true });
  await carol.close();
  await house.close();

  step = "a figure: rendering a thread of 1,000 messages";
  // The message and its html as the server renders it (tests/suite/web_page.rs).
  const render = await page.evaluate(({ text, html }) => {
    const messages = [];
    for (let i = 1; i <= 1000; i++) {
      messages.push({
        seq: 1000000 + i, author: i % 2 ? "ada" : "alice", author_kind: i % 2 ? "human" : "bot",
        created_at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(), text, html,
        tools: i % 10 ? [] : [{ call: { id: "c" + i, name: "run_command", arguments: { command: "ls" } }, status: "ok", text: "a\nb" }],
      });
    }
    // What opening the thread draws (its newest page), and all 1,000 at once:
    // built, inserted and laid out.
    const time = (n) => {
      const start = performance.now();
      renderHistory(messages.slice(-n), "replace");
      void document.getElementById("messages").offsetHeight;
      return Math.round(performance.now() - start);
    };
    time(PAGE); // warm
    return { opened: time(PAGE), all: time(1000), page: PAGE };
  }, { text: process.env.TROUPE_NOTE, html: process.env.TROUPE_NOTE_HTML });

  const result = {
    ok: true, first_load_bytes: firstLoad,
    render_thread_of_1000_ms: render.opened, render_all_1000_ms: render.all, rendered_on_open: render.page,
    axe: axeFound,
  };
  writeFileSync(join(artifacts, "result.json"), JSON.stringify(result));
  console.log(JSON.stringify(result));
  await browser.close();
  lines.close();
} catch (e) {
  await shot("failed").catch(() => {});
  // Every other page open when it failed (the owner's, the new person's).
  const others = browser.contexts().flatMap((c) => c.pages()).filter((p) => p !== page);
  for (const [i, p] of others.entries()) await p.screenshot({ path: join(artifacts, "failed-" + (i + 1) + ".png"), fullPage: true }).catch(() => {});
  console.error("web page: " + step + ": " + e.message);
  await browser.close();
  lines.close();
  process.exit(1);
}
