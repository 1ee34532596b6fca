// Markdown for messages, built as DOM nodes — never as HTML text, so
// nothing a message says can become markup or script. Blocks: paragraphs
// (a line break stays a break), headings, fenced code (with a copy
// button), quotes, lists and task lists, tables, rules. Inline: `code`,
// **strong**, *em*, ~~struck~~, [links](https://…) and bare URLs (http,
// https and mailto only, opened in a new tab with rel=noopener),
// @mentions and troupe://thread/ links as chips.
"use strict";

const md = (() => {
  const h = (tag, attrs, ...kids) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k.startsWith("on")) node.addEventListener(k.slice(2), v); else node.setAttribute(k, v);
    }
    for (const kid of kids) if (kid != null) node.append(kid);
    return node;
  };
  const INLINE = new RegExp([
    "(`+)([^`]|[^`][\\s\\S]*?[^`])\\1(?!`)", // 1,2 code
    "\\*\\*(?=\\S)([\\s\\S]*?\\S)\\*\\*", // 3 strong
    "__(?=\\S)([\\s\\S]*?\\S)__(?!\\w)", // 4 strong
    "~~(?=\\S)([\\s\\S]*?\\S)~~", // 5 struck
    "\\*(?=[^\\s*])([\\s\\S]*?[^\\s*])\\*", // 6 em
    "(?<!\\w)_(?=[^\\s_])([\\s\\S]*?[^\\s_])_(?!\\w)", // 7 em
    "\\[([^\\]\\n]+)\\]\\(\\s*<?([^\\s)>]+)>?\\s*\\)", // 8,9 link
    "((?:https?:\\/\\/|mailto:|troupe:\\/\\/)[^\\s<>]*[^\\s<>.,;:!?)\\]'\"*_~])", // 10 bare URL
    "(?<![\\w@])@([A-Za-z0-9._-]*[A-Za-z0-9_-])", // 11 mention
  ].join("|"), "g");

  // A link's target, when it is one we follow: http(s), mailto, a thread.
  function safeHref(url) {
    if (/^troupe:\/\/thread\//.test(url)) return url;
    try {
      const u = new URL(url);
      return ["http:", "https:", "mailto:"].includes(u.protocol) ? u.href : null;
    } catch (_) { return null; }
  }

  function link(url, label, opts) {
    const href = safeHref(url);
    if (!href) return label;
    if (href.startsWith("troupe://thread/")) {
      const name = decodeURIComponent(href.slice("troupe://thread/".length));
      return h("a", { class: "chip", href: "#", onclick: (e) => { e.preventDefault(); opts.thread && opts.thread(name); } }, "# ", label === url ? name : label);
    }
    return h("a", { href, target: "_blank", rel: "noopener noreferrer" }, label);
  }

  function inline(text, opts) {
    const out = document.createDocumentFragment();
    let last = 0;
    for (const m of text.matchAll(INLINE)) {
      if (m.index > last) out.append(text.slice(last, m.index));
      last = m.index + m[0].length;
      if (m[2] !== undefined) out.append(h("code", {}, m[2]));
      else if (m[3] !== undefined || m[4] !== undefined) out.append(h("strong", {}, inline(m[3] ?? m[4], opts)));
      else if (m[5] !== undefined) out.append(h("del", {}, inline(m[5], opts)));
      else if (m[6] !== undefined || m[7] !== undefined) out.append(h("em", {}, inline(m[6] ?? m[7], opts)));
      else if (m[8] !== undefined) {
        const label = inline(m[8], opts);
        const made = link(m[9], label, opts);
        if (made === label) out.append(m[0]); else out.append(made);
      } else if (m[10] !== undefined) out.append(link(m[10], m[10], opts));
      else if (m[11] !== undefined) out.append(h("span", { class: "mention" }, "@" + m[11]));
    }
    if (last < text.length) out.append(text.slice(last));
    return out;
  }

  // Lines joined by breaks, each rendered inline.
  function lines(list, opts) {
    const out = document.createDocumentFragment();
    list.forEach((line, i) => { if (i) out.append(h("br")); out.append(inline(line, opts)); });
    return out;
  }

  function codeBlock(code, lang) {
    const copy = h("button", { type: "button", class: "copy quiet", "aria-label": "Copy code" }, "Copy");
    copy.addEventListener("click", async () => {
      try { await navigator.clipboard.writeText(code); copy.textContent = "Copied"; } catch (_) { copy.textContent = "Select and copy"; }
    });
    return h("div", { class: "code" }, copy, h("pre", {}, h("code", lang ? { "data-lang": lang } : {}, code)));
  }

  const cells = (row) => row.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
  const LIST = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;

  function blocks(src, opts) {
    const out = document.createDocumentFragment();
    const all = src.replace(/\r\n?/g, "\n").split("\n");
    let i = 0;
    while (i < all.length) {
      const line = all[i];
      let m;
      if (!line.trim()) { i++; continue; }
      if ((m = line.match(/^\s*(```+|~~~+)\s*([\w+#.-]*)/))) {
        const fence = m[1];
        const body = [];
        for (i++; i < all.length && !all[i].trim().startsWith(fence); i++) body.push(all[i]);
        i++;
        out.append(codeBlock(body.join("\n"), m[2]));
      } else if ((m = line.match(/^(#{1,6})\s+(.*?)\s*#*\s*$/))) {
        // A message's headings sit below the page's own (h3 and smaller).
        out.append(h("h" + Math.min(6, m[1].length + 2), { class: "md-h" }, inline(m[2], opts)));
        i++;
      } else if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
        out.append(h("hr")); i++;
      } else if (/^\s*>/.test(line)) {
        const body = [];
        for (; i < all.length && /^\s*>/.test(all[i]); i++) body.push(all[i].replace(/^\s*>\s?/, ""));
        out.append(h("blockquote", {}, blocks(body.join("\n"), opts)));
      } else if (line.includes("|") && i + 1 < all.length && /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/.test(all[i + 1])) {
        const head = cells(line);
        const align = cells(all[i + 1]).map((c) => (c.endsWith(":") ? (c.startsWith(":") ? "center" : "right") : ""));
        const cell = (tag, text, k) => h(tag, align[k] ? { class: "al-" + align[k] } : {}, inline(text, opts));
        const rows = [];
        for (i += 2; i < all.length && all[i].includes("|") && all[i].trim(); i++) rows.push(cells(all[i]));
        out.append(h("div", { class: "table" }, h("table", {},
          h("thead", {}, h("tr", {}, ...head.map((c, k) => cell("th", c, k)))),
          h("tbody", {}, ...rows.map((r) => h("tr", {}, ...head.map((_, k) => cell("td", r[k] || "", k))))))));
      } else if ((m = line.match(LIST))) {
        const ordered = /\d/.test(m[2]);
        const list = h(ordered ? "ol" : "ul", ordered && parseInt(m[2], 10) !== 1 ? { start: String(parseInt(m[2], 10)) } : {});
        const indent = m[1].length;
        while (i < all.length && (m = all[i].match(LIST)) && m[1].length <= indent + 1 && /\d/.test(m[2]) === ordered) {
          const body = [m[3]];
          for (i++; i < all.length && all[i].trim() && !LIST.test(all[i]) && /^\s+/.test(all[i]); i++) body.push(all[i].trim());
          const nested = [];
          while (i < all.length && (m = all[i].match(LIST)) && m[1].length > indent + 1) { nested.push(all[i]); i++; }
          const task = body[0].match(/^\[([ xX])\]\s+(.*)$/);
          const item = h("li", task ? { class: "task" } : {});
          if (task) {
            body[0] = task[2];
            const box = h("input", { type: "checkbox", disabled: "", "aria-label": task[1] === " " ? "to do" : "done" });
            box.checked = task[1] !== " ";
            item.append(box, " ");
          }
          item.append(lines(body, opts));
          if (nested.length) item.append(blocks(nested.map((l) => l.slice(indent + 2)).join("\n"), opts));
          list.append(item);
        }
        out.append(list);
      } else {
        const body = [];
        for (; i < all.length && all[i].trim() && !/^\s*(```|~~~|#{1,6}\s|>)/.test(all[i]) && !(body.length && LIST.test(all[i])); i++) body.push(all[i]);
        if (!body.length) body.push(all[i++]);
        out.append(h("p", {}, lines(body, opts)));
      }
    }
    return out;
  }

  // `text` as Markdown in a new element of class `text`; `opts.thread(name)`
  // opens a thread a troupe://thread/ link names.
  return (text, opts) => h("div", { class: "text md" }, blocks(String(text || ""), opts || {}));
})();
