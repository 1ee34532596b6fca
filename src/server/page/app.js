// troupe's web page: sign in with a member's token, then a house's threads,
// messages streaming in, approvals and questions, files and members.
// Plain DOM, no framework; every call goes through the same API as any
// client (docs/api.md).
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  token: localStorage.getItem("troupe.token"),
  me: null,
  house: null,
  thread: null,
  socket: null,
  lastId: 0,
  retry: 0,
  turns: new Map(), // bot -> its live turn's element
};

async function api(method, path, body, raw) {
  const headers = { Authorization: "Bearer " + state.token };
  let payload;
  if (raw !== undefined) {
    payload = raw;
  } else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const response = await fetch("/api" + path, { method, headers, body: payload });
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try { message = (await response.json()).error.message; } catch (_) { /* not JSON */ }
    const error = new Error(message);
    error.status = response.status;
    throw error;
  }
  return response;
}
const getJson = async (path) => (await api("GET", path)).json();
const enc = encodeURIComponent;
const housePath = () => "/houses/" + enc(state.house);
const threadPath = () => housePath() + "/threads/" + enc(state.thread);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function status(text) { $("status").textContent = text || ""; }

// ---- signing in ----

async function signIn(token) {
  state.token = token;
  try {
    state.me = await getJson("/me");
  } catch (e) {
    state.token = null;
    localStorage.removeItem("troupe.token");
    show("signin");
    $("signin-error").textContent = e.status === 401 ? "That token is unknown or revoked." : e.message;
    return;
  }
  localStorage.setItem("troupe.token", token);
  $("who").textContent = state.me.display_name + " (@" + state.me.handle + ")";
  $("signout").hidden = false;
  show("house");
  await loadHouses();
}

function show(view) {
  $("signin-view").hidden = view !== "signin";
  $("house-view").hidden = view !== "house";
}

$("signin").addEventListener("submit", (event) => {
  event.preventDefault();
  signIn($("token").value.trim());
});
$("signout").addEventListener("click", () => {
  localStorage.removeItem("troupe.token");
  location.reload();
});

// ---- a house: threads, members, files ----

async function loadHouses() {
  const { houses } = await getJson("/houses");
  const select = $("house");
  select.replaceChildren(...houses.map((h) => el("option", { value: h.name }, h.name)));
  const mine = houses.find((h) => h.name === state.me.house.name) || houses[0];
  if (mine) {
    select.value = mine.name;
    await openHouse(mine.name);
  }
}
$("house").addEventListener("change", (event) => openHouse(event.target.value));

async function openHouse(name) {
  state.house = name;
  closeThread();
  await Promise.all([loadThreads(), loadMembers(), loadFiles(), loadRequests()]);
}

async function loadThreads() {
  const { threads } = await getJson(housePath() + "/threads");
  $("threads").replaceChildren(...threads.map((t) => {
    const label = t.name || t.id;
    const button = el("button", { type: "button", onclick: () => openThread(label) },
      (t.pinned ? "pinned: " : "") + label + " ", el("span", { class: "muted" }, "(" + t.messages + ")"));
    if (label === state.thread) button.setAttribute("aria-current", "true");
    return el("li", {}, button);
  }));
}

$("new-thread").addEventListener("submit", async (event) => {
  event.preventDefault();
  const name = $("new-thread-name").value.trim();
  try {
    await api("POST", housePath() + "/threads", { name });
    $("new-thread-name").value = "";
    await loadThreads();
    await openThread(name);
  } catch (e) { status(e.message); }
});

async function loadMembers() {
  const { members } = await getJson(housePath() + "/members");
  $("members").replaceChildren(...members.map((m) => {
    const mode = m.kind === "bot" ? " · bot, listens to " + (m.listen || "mentions") : " · person";
    return el("li", {},
      el("button", { type: "button", title: "Mention @" + m.handle, onclick: () => mention(m.handle) },
        m.display_name || m.handle, el("span", { class: "muted" }, mode)));
  }));
}

function mention(handle) {
  const text = $("text");
  text.value = (text.value ? text.value.replace(/\s*$/, " ") : "") + "@" + handle + " ";
  text.focus();
}

async function loadFiles() {
  const { files } = await getJson(housePath() + "/files");
  $("files").replaceChildren(...files.map((f) => el("li", {},
    el("button", { type: "button", class: "quiet", onclick: () => download(f.path) }, f.path),
    el("span", { class: "muted" }, " v" + f.version + " · " + f.size + " B · " + fileState(f.state)))));
}

function fileState(s) {
  if (!s || typeof s !== "object") return String(s || "");
  return s.state.replace("_", " ") + (s.why ? ": " + s.why : "");
}

async function download(path) {
  try {
    const response = await api("GET", housePath() + "/files/" + path.split("/").map(enc).join("/"));
    const url = URL.createObjectURL(await response.blob());
    const link = el("a", { href: url, download: path.split("/").pop() });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (e) { status(e.message); }
}

$("upload").addEventListener("submit", async (event) => {
  event.preventDefault();
  const file = $("file").files[0];
  if (!file) return;
  const message = $("file-message").value;
  try {
    await api("PUT", housePath() + "/files/" + enc(file.name) + "?message=" + enc(message), undefined, file);
    $("upload").reset();
    status("uploaded " + file.name);
    await loadFiles();
  } catch (e) { status(e.message); }
});

// ---- a thread: messages, the live stream, posting ----

function closeThread() {
  if (state.socket) { state.socket.onclose = null; state.socket.close(); }
  state.socket = null;
  state.thread = null;
  state.turns.clear();
  $("messages").replaceChildren();
  $("post").hidden = true;
  $("thread-title").textContent = "Choose a thread";
}

async function openThread(name) {
  closeThread();
  state.thread = name;
  $("thread-title").textContent = name;
  $("post").hidden = false;
  for (const b of document.querySelectorAll("#threads button")) {
    b.setAttribute("aria-current", String(b.textContent.startsWith(name + " ") || b.textContent.startsWith("pinned: " + name + " ")));
  }
  const { messages } = await getJson(threadPath() + "/messages?limit=100");
  state.lastId = 0;
  for (const m of messages) addMessage(m);
  connect();
  renderRequests();
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const url = scheme + location.host + "/api" + threadPath() + "/events?after=" + state.lastId
    + "&access_token=" + enc(state.token);
  const socket = new WebSocket(url);
  const thread = state.thread;
  state.socket = socket;
  socket.onmessage = (event) => onFrame(JSON.parse(event.data));
  socket.onopen = () => { state.retry = 0; status(""); };
  socket.onclose = () => {
    if (state.thread !== thread) return;
    state.retry = Math.min(state.retry + 1, 5);
    status("connection lost; reconnecting…");
    setTimeout(() => { if (state.thread === thread) connect(); }, 500 * state.retry);
  };
}

function onFrame(frame) {
  switch (frame.type) {
    case "message": addMessage(frame.message); break;
    case "turn_started": turnOf(frame.bot); break;
    case "delta": {
      const turn = turnOf(frame.bot);
      turn.querySelector(".text").textContent += frame.text;
      break;
    }
    case "tool_call": {
      const turn = turnOf(frame.bot);
      const details = el("details", { class: "tool", "data-call": frame.call.id },
        el("summary", {}, frame.call.name),
        el("pre", {}, JSON.stringify(frame.call.arguments, null, 2)));
      turn.querySelector(".tools").append(details);
      break;
    }
    case "tool_result": toolResult(frame); break;
    case "turn_finished": {
      // The answer lands as a message right after; it takes this place.
      const turn = state.turns.get(frame.bot);
      if (turn) { turn.querySelector(".typing").textContent = ""; turn.classList.add("done"); }
      break;
    }
    case "request": loadRequests(); break;
    case "settled": loadThreads(); break;
    default: break;
  }
}

function turnOf(bot) {
  let turn = state.turns.get(bot);
  if (!turn || turn.classList.contains("done")) {
    turn = el("li", { class: "bot live" },
      el("span", { class: "author" }, bot),
      el("span", { class: "typing" }, " is working…"),
      el("div", { class: "tools" }),
      el("div", { class: "links" }),
      el("div", { class: "text" }));
    state.turns.set(bot, turn);
    $("messages").append(turn);
  }
  return turn;
}

function toolResult(frame) {
  const turn = turnOf(frame.bot);
  const details = turn.querySelector('details[data-call="' + CSS.escape(frame.call_id) + '"]')
    || el("details", { class: "tool" }, el("summary", {}, frame.name));
  if (!details.parentNode) turn.querySelector(".tools").append(details);
  if (frame.status !== "ok") details.classList.add("error");
  details.querySelector("summary").textContent += " · " + frame.status + " · " + frame.elapsed_ms + " ms";
  details.append(el("pre", {}, frame.text));
  // A thread a tool made is a link outside the folded details.
  const link = frame.data && frame.data.link;
  if (typeof link === "string" && link.startsWith("troupe://thread/")) {
    const name = frame.data.name || link.slice("troupe://thread/".length);
    turn.querySelector(".links").append(
      el("a", { class: "link", href: "#", onclick: (e) => { e.preventDefault(); openThread(name); } },
        "→ thread " + name));
  }
}

function addMessage(m) {
  if (m.seq <= state.lastId) return;
  state.lastId = m.seq;
  const live = m.author_kind === "bot" && state.turns.get(m.author);
  const item = el("li", { class: m.author_kind, "data-id": String(m.seq) },
    el("span", { class: "author" }, m.author),
    el("time", { class: "time", datetime: m.created_at }, new Date(m.created_at).toLocaleString()),
    live ? live.querySelector(".tools") : null,
    live ? live.querySelector(".links") : null,
    withMentions(m.text));
  if (live) { live.replaceWith(item); state.turns.delete(m.author); } else { $("messages").append(item); }
  item.scrollIntoView({ block: "nearest" });
}

function withMentions(text) {
  const body = el("div", { class: "text" });
  for (const part of text.split(/(@[A-Za-z0-9._-]+)/)) {
    body.append(part.startsWith("@") ? el("span", { class: "mention" }, part) : part);
  }
  return body;
}

$("post").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = $("text").value;
  if (!text.trim()) return;
  try {
    await api("POST", threadPath() + "/messages", { text });
    $("text").value = "";
    status("");
  } catch (e) { status(e.message); }
});
$("text").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("post").requestSubmit();
});

// ---- approvals and questions ----

let pending = [];

async function loadRequests() {
  try { pending = (await getJson("/requests")).requests; } catch (_) { pending = []; }
  renderRequests();
}

function renderRequests() {
  $("requests").replaceChildren(...pending.map((r) => {
    const title = (r.bot ? r.bot + " asks" : "A conversation asks") + (r.kind === "approval" ? " for approval" : "");
    const card = el("div", { class: "request", role: "group", "aria-label": title }, el("strong", {}, title));
    if (r.kind === "approval") {
      card.append(el("p", {}, r.reason || ""), el("pre", {}, r.call.name + " " + JSON.stringify(r.call.arguments, null, 2)));
      for (const [word, label] of [["once", "Approve once"], ["session", "For this session"], ["always", "Always"], ["deny", "Deny"]]) {
        card.append(el("button", { type: "button", class: word === "deny" ? "quiet" : "", onclick: () => answer(r.id, word) }, label), " ");
      }
    } else {
      const asked = Array.isArray(r.questions) ? r.questions : (r.questions && r.questions.questions) || [];
      const inputs = asked.map((q, i) => {
        const id = "q-" + r.id + "-" + i;
        const input = el("input", { id, list: id + "-options" });
        const options = el("datalist", { id: id + "-options" }, ...(q.options || []).map((o) => el("option", { value: o.label || o })));
        card.append(el("label", { for: id }, q.question || String(q)), input, options);
        return [q.question, input];
      });
      card.append(el("button", { type: "button", onclick: () => answer(r.id, { answers: inputs.map(([question, input]) => ({ question, answer: input.value })) }) }, "Answer"));
    }
    return card;
  }));
}

async function answer(id, value) {
  try {
    await api("POST", "/requests/" + enc(id), { answer: value });
  } catch (e) { status(e.message); }
  await loadRequests();
}

// ---- start ----

if (state.token) signIn(state.token); else show("signin");
