// @-completion in the composer: typing `@` and the start of a handle lists
// the house's members who match (handle or name); ↓/↑ choose, Enter or Tab
// takes one, Escape closes. Joined after app.js (state, $, el).
"use strict";

const completion = { open: false, items: [], index: 0, start: 0 };

// The `@word` just before the caret: where it starts and what it says.
function mentionAtCaret(box) {
  const upto = box.value.slice(0, box.selectionStart);
  const m = /(?:^|[^\w@])@([A-Za-z0-9._-]*)$/.exec(upto);
  return m ? { start: upto.length - m[1].length - 1, word: m[1].toLowerCase() } : null;
}

function closeCompletion() {
  completion.open = false;
  $("completions").hidden = true;
  $("completions").replaceChildren();
  $("text").removeAttribute("aria-activedescendant");
}

function showCompletion() {
  const box = $("text");
  const at = mentionAtCaret(box);
  const members = state.members || [];
  const items = at ? members.filter((m) => m.handle.toLowerCase().startsWith(at.word)
    || (m.display_name || "").toLowerCase().startsWith(at.word)).slice(0, 8) : [];
  if (!items.length || (items.length === 1 && items[0].handle.toLowerCase() === at.word)) { closeCompletion(); return; }
  completion.open = true;
  completion.items = items;
  completion.start = at.start;
  completion.index = Math.min(completion.index, items.length - 1);
  $("completions").replaceChildren(...items.map((m, i) => el("li", {
    id: "completion-" + i, role: "option", "aria-selected": String(i === completion.index),
    onmousedown: (e) => { e.preventDefault(); takeCompletion(i); },
  }, "@" + m.handle + " ", el("span", { class: "muted" }, (m.display_name || "") + (m.kind === "bot" ? " · bot" : "")))));
  $("completions").hidden = false;
  box.setAttribute("aria-activedescendant", "completion-" + completion.index);
}

function takeCompletion(i) {
  const box = $("text");
  const m = completion.items[i];
  const before = box.value.slice(0, completion.start);
  const after = box.value.slice(box.selectionStart).replace(/^[A-Za-z0-9._-]*/, "");
  const inserted = "@" + m.handle + " ";
  box.value = before + inserted + after.replace(/^ /, "");
  box.selectionStart = box.selectionEnd = before.length + inserted.length;
  closeCompletion();
  box.focus();
}

$("text").addEventListener("input", () => { completion.index = 0; showCompletion(); });
$("text").addEventListener("blur", closeCompletion);
// Before app.js's own keys (Enter sends, ↑ recalls): a capture listener
// on the box itself runs first.
$("text").addEventListener("keydown", (event) => {
  if (!completion.open) return;
  const n = completion.items.length;
  if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    completion.index = (completion.index + (event.key === "ArrowDown" ? 1 : n - 1)) % n;
    showCompletion();
  } else if ((event.key === "Enter" && !event.shiftKey) || event.key === "Tab") {
    takeCompletion(completion.index);
  } else if (event.key === "Escape") {
    closeCompletion();
  } else {
    return;
  }
  event.preventDefault();
  event.stopImmediatePropagation();
}, true);
