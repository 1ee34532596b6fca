// The owner's views, for the people who manage the node (the house `home`):
// people and tokens in every house, bots (their model and listen modes),
// routines, usage and cost by bot and day (an SVG chart), the live actor
// tree and the workbench of outside executors. Same API as any client
// (docs/api.md: the routes marked "node"); joined after app.js, whose
// helpers ($, el, api, getJson, enc) it uses.
"use strict";

const owner = { open: false, timer: null, houses: [], bots: [] };

function showOwner(open) {
  owner.open = open;
  $("owner-view").hidden = !open;
  $("house-view").hidden = open;
  $("manage").textContent = open ? "Threads" : "Manage";
  $("manage").setAttribute("aria-expanded", String(open));
  clearInterval(owner.timer);
  if (open) {
    loadOwner();
    // The tree and the workbench are live: read again while shown.
    owner.timer = setInterval(() => {
      if (document.visibilityState === "visible") { loadTree().catch(note); loadWorkbench().catch(note); }
    }, 3000);
  }
}
$("manage").addEventListener("click", () => showOwner(!owner.open));

function note(e) { $("owner-status").textContent = e ? e.message || String(e) : ""; }
const act = (fn) => async (event) => {
  if (event && event.preventDefault) event.preventDefault();
  note();
  try { await fn(event); } catch (e) { note(e); }
};
const cap = (text) => el("span", { class: "muted" }, text);
const button = (label, onclick, extra) => el("button", { type: "button", class: "quiet small", onclick: act(onclick), ...(extra || {}) }, label);
const options = (list, chosen) => list.map((v) => { const o = el("option", { value: v }, v); if (v === chosen) o.selected = true; return o; });

async function loadOwner() {
  await Promise.all([loadPeople(), loadBots(), loadRoutines(), loadUsage(), loadTree(), loadWorkbench()].map((p) => p.catch(note)));
}

// ---- people and tokens ----

async function loadPeople() {
  const { houses } = await getJson("/people");
  owner.houses = houses;
  const names = houses.map((h) => h.house.name);
  for (const id of ["person-house", "bot-house"]) {
    const select = $(id);
    const was = select.value;
    select.replaceChildren(...options(names, was || (names.includes("home") && names.length > 1 ? names.find((n) => n !== "home") : names[0])));
  }
  $("people").replaceChildren(...houses.map(houseCard));
}

function houseCard(h) {
  const name = h.house.name;
  const live = (handle) => h.tokens.filter((t) => t.handle === handle && !t.revoked_at).length;
  const members = el("ul", { class: "rows" }, ...h.members.map((m) => {
    const label = el("span", {}, (m.display_name || m.handle) + " ", cap("@" + m.handle));
    const remove = button("Remove", async () => {
      if (!confirm("Take @" + m.handle + " out of " + name + "?")) return;
      await api("DELETE", "/houses/" + enc(name) + "/members/" + enc(m.handle));
      await loadPeople();
    }, { "aria-label": "Remove @" + m.handle + " from " + name });
    if (m.kind === "bot") {
      const id = "listen-" + name + "-" + m.handle;
      const select = el("select", { id, onchange: act(async (e) => {
        await api("POST", "/houses/" + enc(name) + "/members", { bot: m.handle, listen: e.target.value });
        note({ message: "@" + m.handle + " listens to " + e.target.value + " in " + name });
      }) }, ...options(["all", "mentions", "off"], m.listen || "mentions"));
      return el("li", {}, label, cap(" bot, listens to"), el("label", { for: id, class: "visually-hidden" }, "Listen mode of @" + m.handle + " in " + name), select, remove);
    }
    return el("li", {}, label, cap(" person · " + live(m.handle) + " live token(s)"),
      button("New token", async () => {
        const { token } = await (await api("POST", "/houses/" + enc(name) + "/tokens", { handle: m.handle })).json();
        showSecret(token, name);
        await loadPeople();
      }, { "aria-label": "New token for @" + m.handle + " of " + name }), remove);
  }));
  const tokens = h.tokens.length ? el("table", { class: "tokens" },
    el("thead", {}, el("tr", {}, ...["Token", "Person", "Issued", "State"].map((c) => el("th", { scope: "col" }, c)),
      el("th", { scope: "col" }, el("span", { class: "visually-hidden" }, "Revoke")))),
    el("tbody", {}, ...h.tokens.map((t) => el("tr", {},
      el("td", {}, el("code", {}, t.id)), el("td", {}, "@" + t.handle), el("td", {}, day(t.created_at)),
      el("td", {}, t.revoked_at ? "revoked " + day(t.revoked_at) : t.used_at ? "used " + day(t.used_at) : "never used"),
      el("td", {}, t.revoked_at ? "" : button("Revoke", async () => {
        await api("DELETE", "/tokens/" + enc(t.id));
        await loadPeople();
      }, { "aria-label": "Revoke token " + t.id })))))) : cap("No tokens.");
  return el("section", { class: "house-card", "aria-label": "House " + name }, el("h4", {}, name), members, tokens);
}
const day = (at) => (at ? String(at).slice(0, 16).replace("T", " ") : "");

// A token's secret, shown once, with a copy button.
function showSecret(token, house) {
  const box = $("secret");
  const copy = el("button", { type: "button", class: "quiet small", onclick: async () => {
    try { await navigator.clipboard.writeText(token.secret); copy.textContent = "Copied"; } catch (_) { copy.textContent = "Select and copy"; }
  } }, "Copy");
  box.replaceChildren(el("p", {}, "The token of @" + token.handle + " of " + house + " — shown this once; give it to them to sign in:"),
    el("code", { id: "secret-value" }, token.secret), " ", copy);
  box.hidden = false;
}

$("add-person").addEventListener("submit", act(async () => {
  const house = $("person-house").value;
  const body = { human: $("person-handle").value.trim() };
  if ($("person-name").value.trim()) body.name = $("person-name").value.trim();
  const answer = await (await api("POST", "/houses/" + enc(house) + "/members", body)).json();
  if (answer.token) showSecret(answer.token, house); else note({ message: "@" + body.human + " was in " + house + " already; their name is updated" });
  $("add-person").reset();
  $("person-house").value = house;
  await loadPeople();
}));

$("add-bot-member").addEventListener("submit", act(async () => {
  const house = $("bot-house").value;
  await api("POST", "/houses/" + enc(house) + "/members", { bot: $("member-bot").value, listen: $("member-listen").value });
  await loadPeople();
}));

$("new-house").addEventListener("submit", act(async () => {
  await api("POST", "/houses", { name: $("new-house-name").value.trim() });
  $("new-house").reset();
  await Promise.all([loadPeople(), loadHouses()]);
}));

// ---- bots ----

async function loadBots() {
  const { bots } = await getJson("/bots");
  owner.bots = bots;
  $("member-bot").replaceChildren(...options(bots.map((b) => b.spec.name)));
  $("bots").replaceChildren(...bots.map((b) => {
    const id = "model-" + b.spec.name;
    const input = el("input", { id, value: b.spec.model, placeholder: "the home's default" });
    const form = el("form", { class: "inline", onsubmit: act(async () => {
      await api("PATCH", "/bots/" + enc(b.spec.name), { model: input.value.trim() });
      note({ message: b.spec.name + "'s model is now " + (input.value.trim() || "the home's default") });
      await loadBots();
    }) }, el("label", { for: id }, "Model of " + b.spec.name), input, el("button", { type: "submit", class: "small" }, "Save"));
    return el("li", {}, el("strong", {}, b.spec.name), " ", cap(b.spec.title + " — " + b.spec.description), form);
  }));
}

$("new-bot").addEventListener("submit", act(async () => {
  const spec = { name: $("bot-name").value.trim(), title: $("bot-title").value.trim(), description: $("bot-description").value.trim() };
  if ($("bot-model").value.trim()) spec.model = $("bot-model").value.trim();
  await api("POST", "/bots", spec);
  $("new-bot").reset();
  await loadBots();
}));

// ---- routines ----

async function loadRoutines() {
  const { routines } = await getJson("/routines");
  const list = Array.isArray(routines) ? routines : [];
  $("routines").replaceChildren(...(list.length ? list.map((r) => {
    const run = (action) => async () => {
      const { text } = await (await api("POST", "/routines/" + enc(r.id) + "/" + action)).json();
      note({ message: text.split("\n")[0] });
      await loadRoutines();
    };
    return el("li", {}, el("strong", {}, r.name), " ", cap("of " + r.owner + " · " + r.schedule + " · " + r.status + (r.next_fire_at ? " · next " + day(r.next_fire_at) : "")),
      r.status === "paused" ? button("Resume", run("resume"), { "aria-label": "Resume " + r.name }) : button("Pause", run("pause"), { "aria-label": "Pause " + r.name }),
      button("Run now", run("run"), { "aria-label": "Run " + r.name + " now" }));
  }) : [el("li", {}, cap("No routines yet: a bot makes one with its routine tool."))]));
}

// ---- usage and cost, a chart by day ----

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...kids) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  for (const kid of kids) if (kid != null) node.append(kid);
  return node;
}

async function loadUsage() {
  const { usage } = await getJson("/usage");
  // Cost when known, else tokens, else calls (a scripted model counts none).
  const tokensOf = (r) => (r.usage ? (r.usage.input_tokens || 0) + (r.usage.output_tokens || 0) : 0);
  const metric = usage.some((r) => r.cost_usd > 0) ? "cost" : usage.some((r) => tokensOf(r) > 0) ? "tokens" : "calls";
  const value = (r) => (metric === "cost" ? r.cost_usd || 0 : metric === "tokens" ? tokensOf(r) : r.calls || 0);
  const days = [...new Set(usage.map((r) => r.day))].sort().slice(-14);
  const bots = [...new Set(usage.map((r) => r.bot || r.bot_id))];
  const total = (d) => usage.filter((r) => r.day === d).reduce((a, r) => a + value(r), 0);
  const top = Math.max(1e-9, ...days.map(total));
  const unit = (v) => (metric === "cost" ? "$" + v.toFixed(v < 1 ? 4 : 2) : Math.round(v) + " " + metric);
  if (!days.length) { $("usage").replaceChildren(cap("No model calls yet.")); return; }
  const W = 40 * days.length + 40, H = 160;
  const chart = svg("svg", { viewBox: "0 0 " + W + " " + (H + 30), width: W, height: H + 30, role: "img", "aria-labelledby": "usage-title" },
    svg("title", { id: "usage-title" }, metric[0].toUpperCase() + metric.slice(1) + " by bot and day, the last " + days.length + " day(s)"));
  days.forEach((d, i) => {
    let y = H;
    bots.forEach((b, k) => {
      const v = usage.filter((r) => r.day === d && (r.bot || r.bot_id) === b).reduce((a, r) => a + value(r), 0);
      if (!v) return;
      const h = Math.max(1, (v / top) * (H - 10));
      y -= h;
      chart.append(svg("rect", { x: 30 + i * 40, y, width: 28, height: h, class: "series-" + (k % 6) }, svg("title", {}, b + ", " + d + ": " + unit(v))));
    });
    chart.append(svg("text", { x: 44 + i * 40, y: H + 16, "text-anchor": "middle", class: "axis" }, d.slice(5)));
  });
  const legend = el("ul", { class: "legend" }, ...bots.map((b, k) => el("li", {}, el("span", { class: "swatch series-" + (k % 6) }), b + ": " +
    unit(usage.filter((r) => (r.bot || r.bot_id) === b).reduce((a, r) => a + value(r), 0)))));
  $("usage").replaceChildren(chart, legend);
}

// ---- the live actor tree ----

async function loadTree() {
  const { actors } = await getJson("/tree");
  const key = (a) => a.kind + "/" + a.id;
  const kids = new Map();
  for (const a of actors) {
    const parent = a.parent || "";
    if (!kids.has(parent)) kids.set(parent, []);
    kids.get(parent).push(a);
  }
  const known = new Set(actors.flatMap((a) => [a.id, key(a)]));
  const branch = (list) => el("ul", {}, ...list.map((a) => el("li", {},
    el("span", { class: "actor-" + a.state }, a.kind + " "), cap(a.id + " · " + a.state + (a.restarts ? " · restarted " + a.restarts + "×" : "")),
    kids.has(a.id) || kids.has(key(a)) ? branch([...(kids.get(a.id) || []), ...(kids.get(key(a)) || [])]) : null)));
  const roots = actors.filter((a) => !a.parent || !known.has(a.parent));
  $("tree").replaceChildren(cap(actors.length + " actors"), branch(roots));
}

// ---- the workbench ----

async function loadWorkbench() {
  const { instances } = await getJson("/workbench");
  $("workbench").replaceChildren(...(instances.length ? instances.map((w) => el("li", {},
    el("strong", {}, w.executor + " "), cap(w.status + " · " + (w.folder || "") + " · " + (w.elapsed || "")),
    el("div", {}, w.goal || ""),
    w.status === "running" ? button("Stop", async () => { await api("POST", "/workbench/" + enc(w.id) + "/stop"); await loadWorkbench(); }, { "aria-label": "Stop " + w.id }) : null))
    : [el("li", {}, cap("No instances yet."))]));
}

$("start-work").addEventListener("submit", act(async () => {
  await api("POST", "/workbench", { executor: $("work-executor").value.trim(), folder: $("work-folder").value.trim(), task: $("work-task").value.trim() });
  $("work-task").value = "";
  await loadWorkbench();
}));
