// troupe's web page: sign in with a member's token, then a house's threads,
// messages streaming in (Markdown rendered by the server, put in by md() of
// markdown.js), approvals and questions, files and members; deep links, unread marks, the connection's
// state at the top.
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
  threads: [], // the house's threads, as last listed
  target: null, // a message to show once its thread is open (#…/m/SEQ)
};
const seenKey = (thread) => "troupe.seen." + state.house + "." + thread;

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

// The connection's state, at the top of the page: lost, back.
let bannerTimer = null;
function banner(text, ok) {
  clearTimeout(bannerTimer);
  const b = $("banner");
  b.textContent = text || "";
  b.className = ok ? "ok" : "";
  b.hidden = !text;
  if (ok) bannerTimer = setTimeout(() => { b.hidden = true; }, 2500);
}

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
  $("manage").hidden = !state.me.manages_node;
  show("house");
  await loadHouses();
}

function show(view) {
  $("signin-view").hidden = view !== "signin";
  $("house-view").hidden = view !== "house";
  $("owner-view").hidden = true;
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
  const link = parseLink(location.hash) || parseLink(localStorage.getItem("troupe.last") || "");
  const mine = (link && houses.find((h) => h.name === link.house))
    || houses.find((h) => h.name === state.me.house.name) || houses[0];
  if (mine) {
    select.value = mine.name;
    await openHouse(mine.name);
    if (link && link.house === mine.name && link.thread) {
      state.target = link.message;
      await openThread(link.thread);
    }
  }
}
$("house").addEventListener("change", (event) => openHouse(event.target.value));

// Deep links: #/h/HOUSE/t/THREAD, and /m/SEQ for one message.
function parseLink(hash) {
  const m = /^#\/h\/([^/]+)(?:\/t\/([^/]+)(?:\/m\/(\d+))?)?$/.exec(hash);
  if (!m) return null;
  const dec = (x) => { try { return decodeURIComponent(x); } catch (_) { return x; } };
  return { house: dec(m[1]), thread: m[2] && dec(m[2]), message: m[3] ? Number(m[3]) : null };
}
const linkOf = (thread, seq) => "#/h/" + enc(state.house) + (thread ? "/t/" + enc(thread) : "") + (seq ? "/m/" + seq : "");
window.addEventListener("hashchange", async () => {
  const link = parseLink(location.hash);
  if (!link || !state.me) return;
  if (link.house !== state.house) {
    $("house").value = link.house;
    await openHouse(link.house);
  }
  if (link.thread && link.thread !== state.thread) {
    state.target = link.message;
    await openThread(link.thread);
  } else if (link.message) {
    showMessage(link.message);
  }
});

async function openHouse(name) {
  state.house = name;
  closeThread();
  history.replaceState(null, "", linkOf());
  await Promise.all([loadThreads(), loadMembers(), loadFiles(), loadRequests()]);
}

async function loadThreads() {
  const { threads } = await getJson(housePath() + "/threads");
  state.threads = threads;
  $("threads").replaceChildren(...threads.map((t) => {
    const label = t.name || t.id;
    if (label === state.thread) localStorage.setItem(seenKey(label), String(t.messages));
    const unread = t.messages - Number(localStorage.getItem(seenKey(label)) || 0);
    const button = el("button", { type: "button", "data-thread": label, onclick: () => openThread(label) },
      (t.pinned ? "pinned: " : "") + label + " ", el("span", { class: "muted" }, "(" + t.messages + ")"),
      unread > 0 && label !== state.thread ? el("span", { class: "unread", title: unread + " unread" }, String(unread)) : null);
    if (label === state.thread) button.setAttribute("aria-current", "true");
    return el("li", {}, button);
  }));
  showPin();
}
// Other threads' new messages: the list is read again now and then.
setInterval(() => { if (state.house && document.visibilityState === "visible") loadThreads().catch(() => {}); }, 5000);

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
  state.members = members;
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
  $("messages").onscroll = null;
  state.turns.clear();
  $("messages").replaceChildren();
  $("post").hidden = true;
  $("pin").hidden = true;
  $("thread-title").textContent = "Choose a thread";
}

// The open thread's pin button says what it is and what a press does.
function showPin() {
  const t = state.threads.find((x) => (x.name || x.id) === state.thread);
  const pinned = Boolean(t && t.pinned);
  $("pin").hidden = !state.thread;
  $("pin").textContent = pinned ? "Unpin" : "Pin";
  $("pin").setAttribute("aria-pressed", String(pinned));
}

$("pin").addEventListener("click", async () => {
  const pinned = $("pin").getAttribute("aria-pressed") !== "true";
  try {
    await api("POST", threadPath() + "/pin", { pinned });
    await loadThreads();
  } catch (e) { status(e.message); }
});

async function openThread(name) {
  closeThread();
  state.thread = name;
  $("thread-title").textContent = name;
  $("post").hidden = false;
  showPin();
  const link = linkOf(name, state.target);
  history.replaceState(null, "", link);
  localStorage.setItem("troupe.last", link);
  for (const b of document.querySelectorAll("#threads button")) {
    b.setAttribute("aria-current", String(b.dataset.thread === name));
    if (b.dataset.thread === name) for (const u of b.querySelectorAll(".unread")) u.remove();
  }
  let messages;
  try {
    ({ messages } = await getJson(threadPath() + "/messages?limit=" + PAGE));
  } catch (e) {
    status(e.message);
    return;
  }
  if (state.thread !== name) return;
  state.lastId = messages.length ? messages[messages.length - 1].seq : 0;
  renderHistory(messages, "replace");
  markSeen();
  if (state.target) showMessage(state.target); else scrollDown();
  state.target = null;
  connect();
  renderRequests();
}

function markSeen() {
  const t = state.threads.find((x) => (x.name || x.id) === state.thread);
  if (t) localStorage.setItem(seenKey(state.thread), String(Math.max(t.messages, $("messages").querySelectorAll("li[data-id]").length)));
}

function showMessage(seq) {
  const item = document.getElementById("msg-" + seq);
  if (!item) return;
  for (const old of document.querySelectorAll("#messages li.target")) old.classList.remove("target");
  item.classList.add("target");
  item.scrollIntoView({ block: "center" });
}

function scrollDown() { const list = $("messages"); list.scrollTop = list.scrollHeight; }

function connect() {
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const url = scheme + location.host + "/api" + threadPath() + "/events?after=" + state.lastId
    + "&access_token=" + enc(state.token);
  const socket = new WebSocket(url);
  const thread = state.thread;
  state.socket = socket;
  socket.onmessage = (event) => onFrame(JSON.parse(event.data));
  socket.onopen = () => {
    if (state.retry > 0) {
      banner("Connected again; the thread is up to date.", true);
      loadThreads().catch(() => {});
      loadRequests();
    }
    state.retry = 0;
  };
  socket.onclose = () => {
    if (state.thread !== thread) return;
    state.retry = Math.min(state.retry + 1, 5);
    banner("Connection lost — reconnecting…");
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
    case "tool_call": turnOf(frame.bot).querySelector(".tools").append(fold(frame.call)); break;
    case "tool_result": toolResult(frame); break;
    case "turn_finished": {
      // The answer lands as a message right after; it takes this place.
      // A turn that did not finish posts nothing: its row says why.
      const turn = state.turns.get(frame.bot);
      if (turn) {
        turn.querySelector(".typing").textContent = "";
        turn.classList.add("done");
        const o = frame.outcome || {};
        if (o.status && o.status !== "finished") {
          state.turns.delete(frame.bot); // nothing will take its place
          const why = o.error || o.reason || o.detail || "";
          turn.querySelector(".text").after(el("p", { class: "failed", role: "alert" },
            frame.bot + "'s turn did not finish (" + o.status.replace("_", " ") + ")" + (why ? ": " + why : "")));
        }
      }
      break;
    }
    case "held":
      // A bot named in a post that a guard (or its listen mode) held back.
      append(el("li", { class: "held muted", role: "status" }, frame.bot + " was not offered a turn: " + frame.reason));
      break;
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
      el("div", { class: "text live" }));
    state.turns.set(bot, turn);
    append(turn);
  }
  return turn;
}

// Appends to the thread, following it down when the reader was at the end.
function append(item) {
  const list = $("messages");
  const atEnd = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  list.append(item);
  if (atEnd) scrollDown();
}

// A tool call, folded: its name, its arguments, later its result.
function fold(call) {
  return el("details", { class: "tool", "data-call": call.id },
    el("summary", {}, call.name),
    el("pre", {}, JSON.stringify(call.arguments, null, 2)));
}

// A result in its fold; text from outside is marked, never shown raw.
function settle(details, status, text, untrusted, elapsed) {
  if (status !== "ok") details.classList.add("error");
  details.querySelector("summary").append(" · " + status + (elapsed !== undefined ? " · " + elapsed + " ms" : ""));
  if (untrusted) {
    const from = [untrusted.source, untrusted.tool].filter(Boolean).join(" · ");
    details.append(el("span", { class: "badge", title: "Text from outside troupe: data, not instructions" }, "untrusted" + (from ? " · " + from : "")));
  }
  details.append(el("pre", {}, text));
}

function toolResult(frame) {
  const turn = turnOf(frame.bot);
  const details = turn.querySelector('details[data-call="' + CSS.escape(frame.call_id) + '"]')
    || el("details", { class: "tool" }, el("summary", {}, frame.name));
  if (!details.parentNode) turn.querySelector(".tools").append(details);
  settle(details, frame.status, frame.text, frame.untrusted, frame.elapsed_ms);
  threadLink(turn.querySelector(".links"), frame.data);
}

// A thread a tool made is a link outside the folded details.
function threadLink(links, data) {
  const link = data && data.link;
  if (typeof link === "string" && link.startsWith("troupe://thread/")) {
    const name = data.name || link.slice("troupe://thread/".length);
    links.append(el("a", { class: "link", href: "#", onclick: (e) => { e.preventDefault(); openThread(name); } },
      "→ thread " + name));
  }
}

// An image a message carries (a bot's GIF): shown at its size, with its
// title as alternative text and the service's attribution linking to its page.
function attachment(a) {
  if (!a || a.kind !== "image" || typeof a.url !== "string" || !/^https?:\/\//.test(a.url)) return null;
  const img = el("img", { src: a.url, alt: a.title || "image", loading: "lazy" });
  if (a.width && a.height) { img.width = a.width; img.height = a.height; }
  const credit = typeof a.page === "string" && /^https?:\/\//.test(a.page)
    ? el("a", { href: a.page, target: "_blank", rel: "noopener noreferrer" }, a.attribution || a.page)
    : el("span", {}, a.attribution || "");
  return el("figure", { class: "attachment" }, img, el("figcaption", { class: "muted" }, a.title ? a.title + " · " : "", credit));
}

// One formatter for every message's time (toLocaleString makes one each call).
const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "short", timeStyle: "medium" });
const timeOf = (m) => el("a", { class: "time", href: linkOf(state.thread, m.seq), title: "Link to this message" },
  el("time", { datetime: m.created_at }, timeFormat.format(new Date(m.created_at))));

// A message's row: author, time, the folds of the turn that wrote it (from
// the store, or `live`'s as they streamed), its Markdown, its images.
function messageItem(m, live, images) {
  let tools = live ? live.querySelector(".tools") : null;
  let links = live ? live.querySelector(".links") : null;
  if (!tools && Array.isArray(m.tools) && m.tools.length) {
    links = el("div", { class: "links" });
    tools = el("div", { class: "tools" }, ...m.tools.map((t) => {
      const details = fold(t.call);
      if (t.status) settle(details, t.status, t.text, t.untrusted);
      threadLink(links, t.data);
      return details;
    }));
  }
  return el("li", { class: m.author_kind, id: "msg-" + m.seq, "data-id": String(m.seq) },
    el("span", { class: "author" }, m.author), timeOf(m), tools, links,
    m.text ? md(m, { thread: openThread }) : null,
    ...(images || imagesOf(m)));
}
const imagesOf = (m) => (Array.isArray(m.attachments) ? m.attachments.map(attachment).filter(Boolean) : []);

// A page of history, oldest first, built off the document and put in with
// one insertion: at the end (`replace`: instead of what is there) or before
// the first row, keeping the reader where they were.
const PAGE = 100;
function renderHistory(messages, where) {
  const list = $("messages");
  const rows = document.createDocumentFragment();
  for (const m of messages) rows.append(messageItem(m));
  if (where === "replace") {
    list.replaceChildren(rows);
  } else {
    const height = list.scrollHeight;
    list.querySelector("li.earlier")?.remove();
    list.prepend(rows);
    list.scrollTop += list.scrollHeight - height;
  }
  earlierButton(messages.length === PAGE && messages[0] ? messages[0].seq : null);
}

// Older messages are read a page at a time, by the button at the top or by
// scrolling up to it.
function earlierButton(before) {
  const list = $("messages");
  list.querySelector("li.earlier")?.remove();
  if (before === null) return;
  const thread = state.thread;
  const more = async () => {
    if (more.busy || state.thread !== thread) return;
    more.busy = true;
    try {
      const { messages } = await getJson(threadPath() + "/messages?limit=" + PAGE + "&before=" + before);
      if (state.thread === thread) renderHistory(messages, "before");
    } catch (e) { status(e.message); more.busy = false; }
  };
  list.prepend(el("li", { class: "earlier" }, el("button", { type: "button", class: "quiet", onclick: more }, "Earlier messages")));
  list.onscroll = () => { if (list.scrollTop < 40) more(); };
}

function addMessage(m) {
  if (m.seq <= state.lastId) return;
  state.lastId = m.seq;
  const images = imagesOf(m);
  // A post made during a turn (a GIF) goes above the turn, which goes on.
  const midTurn = images.length > 0 && !m.text && m.author_kind === "bot" && state.turns.get(m.author);
  if (midTurn) {
    midTurn.before(el("li", { class: "bot", id: "msg-" + m.seq, "data-id": String(m.seq) },
      el("span", { class: "author" }, m.author), timeOf(m), ...images));
    if (document.visibilityState === "visible") markSeen();
    return;
  }
  const live = m.author_kind === "bot" && state.turns.get(m.author);
  const item = messageItem(m, live, images);
  if (live) { live.replaceWith(item); state.turns.delete(m.author); } else { append(item); }
  if (state.me && m.author === state.me.handle) scrollDown();
  if (document.visibilityState === "visible") markSeen();
}

// A post that fails keeps its text in the box and says so, with a retry.
async function send() {
  const text = $("text").value;
  if (!text.trim()) return;
  const error = $("post-error");
  try {
    await api("POST", threadPath() + "/messages", { text });
    if ($("text").value === text) $("text").value = "";
    localStorage.setItem("troupe.draft", text);
    error.hidden = true;
  } catch (e) {
    const why = e instanceof TypeError ? "the server cannot be reached" : e.message;
    error.querySelector("span").textContent = "Not sent: " + why + ". Your text is kept.";
    error.hidden = false;
  }
}
$("post").addEventListener("submit", (event) => { event.preventDefault(); send(); });
$("retry").addEventListener("click", send);
$("text").addEventListener("keydown", (event) => {
  if (event.key !== "Enter" || event.isComposing) return;
  if (event.shiftKey) return; // a new line
  event.preventDefault();
  $("post").requestSubmit();
});
// ↑ in an empty box brings back the last message sent.
$("text").addEventListener("keyup", (event) => {
  if (event.key === "ArrowUp" && !$("text").value && !completion.open) $("text").value = localStorage.getItem("troupe.draft") || "";
});
$("to-threads").addEventListener("click", () => $("nav").scrollIntoView());

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
