// A message's Markdown, as the server rendered it: `html` is made by
// pulldown-cmark and cleaned by ammonia's allow-list (src/server/markdown.rs)
// — no script, handler, style or foreign element, links only http(s),
// mailto and troupe://. It goes in as a container's innerHTML; the CSP
// (no inline script) is the second wall. Here the page only adds what
// needs a handler: a copy button on each code block, and troupe://thread/
// links as chips that open the thread. Without `html` (a turn still
// streaming) the text is shown as it is.
"use strict";

const md = (() => {
  function copyButton(block) {
    const code = block.querySelector("code")?.textContent ?? "";
    const copy = document.createElement("button");
    Object.assign(copy, { type: "button", className: "copy quiet", textContent: "Copy" });
    copy.setAttribute("aria-label", "Copy code");
    copy.addEventListener("click", async () => {
      try { await navigator.clipboard.writeText(code); copy.textContent = "Copied"; } catch (_) { copy.textContent = "Select and copy"; }
    });
    block.prepend(copy);
  }

  function chip(a, opts) {
    const name = decodeURIComponent(a.getAttribute("href").slice("troupe://thread/".length));
    if (a.textContent === a.getAttribute("href")) a.textContent = name;
    a.prepend("# ");
    a.className = "chip";
    a.removeAttribute("target");
    a.setAttribute("href", "#");
    a.addEventListener("click", (e) => { e.preventDefault(); opts.thread && opts.thread(name); });
  }

  // Message `m` in a new element of class `text`; `opts.thread(name)`
  // opens a thread a troupe://thread/ link names.
  return (m, opts) => {
    const box = document.createElement("div");
    box.className = "text md";
    if (typeof m.html !== "string") { box.textContent = m.text || ""; return box; }
    box.innerHTML = m.html;
    box.querySelectorAll("div.code").forEach(copyButton);
    box.querySelectorAll('a[href^="troupe://thread/"]').forEach((a) => chip(a, opts || {}));
    return box;
  };
})();
