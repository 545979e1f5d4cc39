// roost web: the live list (/ws/list), a terminal per session (/ws/term), actions (/api/...).
// Nothing here polls the server: the list and the terminal change as the server pushes.
"use strict";

const config = JSON.parse(document.body.dataset.config);
const $ = (sel) => document.querySelector(sel);
const entries = new Map(); // key -> {key, node, record, last_activity, turn}
let selected = null;
let filterText = "";
const ACTIVE = ["starting", "live", "attention", "stopping"];
const ACTIVITY = { busy: "working", ready: "ready", starting: "starting", attention: "waiting", shell: "shell", exited: "exited" };
const debug = { notices: [], stream: null, listMessages: 0 };
window.roostDebug = debug;

// -- the list ------------------------------------------------------------------------------

const columns = [
  ...(config.hub ? [["node", "NODE"]] : []),
  ["name", "NAME"], ["id", "ID"], ["provider", "PROVIDER"], ["mode", "MODE"], ["state", "STATE"],
  ["activity", "ACTIVITY"], ["cwd", "CWD"], ["age", "AGE"], ["last", "LAST"],
];
$("#list thead tr").innerHTML = columns.map(([c, label]) => `<th class="${c}">${label}</th>`).join("");

function activity(e) {
  const r = e.record;
  if (!ACTIVE.includes(r.state)) return "-";
  if (r.mode === "stream") return e.turn ? "working" : "ready";
  return r.activity ? (ACTIVITY[r.activity] || r.activity) : "-";
}

function stateText(r) {
  return r.state + (r.attention ? ` (${r.attention})` : "");
}

function ago(seconds) {
  seconds = Math.max(0, seconds);
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (seconds >= size) return `${Math.floor(seconds / size)}${unit}`;
  }
  return `${Math.floor(seconds)}s`;
}

function haystack(e) {
  const r = e.record;
  return [e.node, r.name, r.id, r.provider, r.mode, r.state, r.attention, r.cwd, activity(e)]
    .filter(Boolean).join(" ").toLowerCase();
}

function cells(e, now) {
  const r = e.record;
  return {
    node: e.node, name: r.name || "-", id: r.id, provider: r.provider, mode: r.mode,
    state: stateText(r), activity: activity(e), cwd: r.cwd || "",
    age: ago(now - (r.created || now)), last: ago(now - (e.last_activity || now)),
  };
}

function render() {
  const words = filterText.toLowerCase().split(/\s+/).filter(Boolean);
  const now = Date.now() / 1000;
  const shown = [...entries.values()]
    .filter((e) => words.every((w) => haystack(e).includes(w)))
    .sort((a, b) => a.node.localeCompare(b.node) || (a.record.created || 0) - (b.record.created || 0));
  const body = $("#list tbody");
  body.replaceChildren(...shown.map((e) => {
    const tr = document.createElement("tr");
    tr.dataset.key = e.key;
    if (e.key === selected) tr.classList.add("selected");
    const c = cells(e, now);
    for (const [col] of columns) {
      const td = document.createElement("td");
      td.className = col + (col === "state" ? ` st-${e.record.state}` : "");
      td.textContent = c[col];
      tr.appendChild(td);
    }
    tr.addEventListener("click", () => select(e.key));
    return tr;
  }));
  $("#empty").hidden = shown.length > 0;
  $("#empty").textContent = entries.size ? `no record matches '${filterText}'` : "no records";
  if (selected && entries.has(selected)) showDetail();
}

$("#filter").addEventListener("input", (ev) => { filterText = ev.target.value; render(); });
setInterval(render, 1000); // the ages move on; nothing is asked of the server

function status(text, down) {
  const s = $("#status");
  s.textContent = text;
  s.classList.toggle("down", !!down);
}

function listSocket() {
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/list`);
  ws.onopen = () => status("live");
  ws.onmessage = (ev) => {
    const m = JSON.parse(ev.data);
    debug.listMessages++;
    if (m.t === "list") {
      entries.clear();
      for (const e of m.entries) entries.set(e.key, e);
      status(m.connected ? "live" : "the node does not answer", !m.connected);
    } else if (m.t === "record") {
      entries.set(m.entry.key, m.entry);
    } else if (m.t === "gone") {
      entries.delete(m.key);
      if (selected === m.key) closeDetail();
    } else if (m.t === "connection") {
      status(m.connected ? "live" : "the node does not answer", !m.connected);
    } else if (m.t === "notice") {
      notice(m);
    }
    render();
  };
  ws.onclose = () => { status("disconnected from the server; reconnecting", true); setTimeout(listSocket, 1000); };
}

// -- notifications -------------------------------------------------------------------------

function toast(text) {
  const div = document.createElement("div");
  div.className = "toast";
  div.textContent = text;
  $("#toasts").appendChild(div);
  setTimeout(() => div.remove(), 8000);
}

function notice(m) {
  const text = `${m.name}: ${m.text}`;
  debug.notices.push(m);
  toast(text);
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  const options = { body: text, tag: `${m.key}:${m.kind}`, icon: "/static/icon.svg" };
  // through the service worker where there is one (a phone has no `new Notification`); a push
  // message of the same notice has the same tag and replaces it rather than adding a second
  if (worker) worker.then((reg) => reg.showNotification("roost", options)).catch(() => {});
  else new Notification("roost", options);
}

// The service worker (sw.js): Web Push messages shown with no page open; the page installable.
const worker = "serviceWorker" in navigator
  ? navigator.serviceWorker.register("/sw.js", { scope: "/" }).then(() => navigator.serviceWorker.ready)
  : null;
if (worker) worker.catch((err) => { debug.workerError = String(err); });

function keyBytes(text) {
  const b64 = (text + "=".repeat((4 - (text.length % 4)) % 4)).replace(/-/g, "+").replace(/_/g, "/");
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

function sameKey(sub) {
  const had = sub.options && sub.options.applicationServerKey;
  if (!had) return true;
  const a = new Uint8Array(had), b = keyBytes(config.push);
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

// With the server's VAPID key (`roost web keys`) and the user's permission: subscribe, and tell
// the server where to push (again on every load: the server may have lost or dropped it).
async function subscribe(asked) {
  if (!config.push || !worker || !("PushManager" in window)) {
    if (asked) toast(config.push ? "this browser has no Web Push: notifications while this page is open" : "notifications while this page is open (for push with the page closed: `roost web keys` on the server)");
    return;
  }
  try {
    const reg = await worker;
    let sub = await reg.pushManager.getSubscription();
    if (sub && !sameKey(sub)) { await sub.unsubscribe(); sub = null; }
    if (!sub) sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(config.push) });
    await api("push/subscribe", sub.toJSON());
    if (asked) toast("notifications on, also with this page closed (Web Push)");
  } catch (err) {
    if (asked) toast(`push not set up: ${err.message}; notifications while this page is open`);
  }
}

$("#notify").addEventListener("click", async () => {
  if (!("Notification" in window)) { toast("this browser has no notifications"); return; }
  const answer = await Notification.requestPermission();
  if (answer === "granted") await subscribe(true);
  else toast(`notifications ${answer} by the browser`);
});
if ("Notification" in window && Notification.permission === "granted") {
  $("#notify").hidden = true;
  subscribe(false);
}

// -- actions -------------------------------------------------------------------------------

async function api(action, body) {
  const response = await fetch(`/api/${action}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": config.csrf },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  const doc = await response.json();
  if (doc.error) throw new Error(`${doc.error.code}: ${doc.error.message}`);
  return doc;
}

function current() { return selected ? entries.get(selected) : null; }
function target(e) { return { node: e.node, id: e.record.id }; }

function textDialog(title, go, withWorktree, needsText) {
  const dlg = $("#text-dialog");
  $("#text-title").textContent = title;
  $("#text-error").textContent = "";
  $("#text-go").textContent = needsText ? "send" : "yes, forget it";
  dlg.querySelector("textarea").hidden = !needsText;
  $("#forget-wt").hidden = !withWorktree;
  dlg.querySelector("form").reset();
  dlg.onclose = async () => {
    if (dlg.returnValue !== "go") return;
    const form = new FormData($("#text-form"));
    try { await go(form); } catch (err) { toast(`refused: ${err.message}`); }
  };
  dlg.showModal();
}

document.querySelectorAll("[data-action]").forEach((button) => button.addEventListener("click", async () => {
  const e = current();
  const action = button.dataset.action;
  if (action === "close") { closeDetail(); return; }
  if (!e) return;
  const name = e.record.name || e.record.id;
  try {
    if (action === "prompt" || action === "turn") {
      textDialog(`${action} ${name}`, (f) => api(action, { ...target(e), text: f.get("text") }).then(() => toast(`${action} sent to ${name}`)), false, true);
    } else if (action === "forget") {
      textDialog(`forget ${name}? its record and transcript are deleted`, (f) => api("forget", { ...target(e), remove_worktree: f.get("remove_worktree") === "on" }).then(() => toast(`${name} forgotten`)), !!e.record.worktree, false);
    } else if (action === "diff") {
      const d = await api("diff", target(e));
      const head = `${d.branch} (${d.files.length} files, ${d.commits.length} commits${d.truncated ? ", cut" : ""})\n`;
      $("#diff").textContent = head + (d.patch || "(no changes)");
      $("#diff").hidden = false;
      $("#terminal").hidden = true;
    } else {
      await api(action, target(e));
      toast(`${action}: ${name}`);
    }
  } catch (err) { toast(`${action} refused: ${err.message}`); }
}));

$("#spawn-open").addEventListener("click", () => {
  $("#spawn-node-row").hidden = !config.hub;
  $("#spawn-error").textContent = "";
  $("#spawn-dialog").showModal();
});
$("#spawn-go").addEventListener("click", async (ev) => {
  ev.preventDefault();
  const f = new FormData($("#spawn-form"));
  const body = {};
  for (const k of ["node", "provider", "cwd", "name", "mode", "restore", "on_limit"]) if (f.get(k)) body[k] = f.get(k);
  const wt = (f.get("worktree") || "").trim();
  if (wt) body.worktree = wt === "+" ? true : wt;
  const env = {};
  for (const line of (f.get("env") || "").split("\n")) {
    const at = line.indexOf("=");
    if (at > 0) env[line.slice(0, at).trim()] = line.slice(at + 1);
  }
  body.env = env;
  try {
    const doc = await api("spawn", body);
    $("#spawn-dialog").close();
    toast(`spawned ${doc.record.name || doc.record.id}`);
  } catch (err) { $("#spawn-error").textContent = err.message; }
});

$("#logout").hidden = !config.login;
$("#logout").addEventListener("click", async () => {
  await fetch("/logout", { method: "POST", headers: { "X-CSRF-Token": config.csrf } });
  location.reload();
});
$("#readonly").hidden = config.role !== "observer";

// -- the terminal --------------------------------------------------------------------------

let view = null; // {key, term, fit, ws, expected, closing}

function select(key) {
  if (selected === key && view) return;
  selected = key;
  closeView();
  $("#diff").hidden = true;
  $("#terminal").hidden = false;
  showDetail();
  render();
  const e = entries.get(key);
  if (!view) $("#term-note").textContent = e && e.record.mode === "stream"
    ? "a stream session: no terminal; send it a turn" : "no live terminal (the session is not running)";
}

function showDetail() {
  const e = current();
  if (!e) return;
  $("#detail").hidden = false;
  $("#detail-title").textContent = `${e.record.name || "-"} ${e.record.id}${e.node ? " on " + e.node : ""}`;
  $("#detail-state").textContent = `${stateText(e.record)} · ${activity(e)}`;
  const live = ["live", "attention"].includes(e.record.state);
  const ro = config.role === "observer";
  const set = (a, on) => { document.querySelector(`[data-action="${a}"]`).disabled = !on || ro; };
  set("prompt", live && e.record.mode === "pty");
  set("turn", live && e.record.mode === "stream");
  set("stop", ACTIVE.includes(e.record.state));
  set("resume", ["dormant", "failed"].includes(e.record.state));
  set("forget", ["dormant", "failed"].includes(e.record.state));
  document.querySelector('[data-action="diff"]').disabled = !e.record.worktree;
  if (live && e.record.mode === "pty" && !view && selected) openView(e);
}

function closeDetail() { closeView(); selected = null; $("#detail").hidden = true; render(); }

function closeView() {
  if (!view) return;
  view.closing = true;
  if (view.ws) view.ws.close();
  view.term.dispose();
  window.removeEventListener("resize", view.onResize);
  view = null;
  $("#term-note").textContent = "";
}

function openView(e) {
  const term = new Terminal({ convertEol: false, scrollback: 5000, fontSize: 13, disableStdin: false });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  $("#terminal").replaceChildren();
  term.open($("#terminal"));
  fit.fit();
  view = { key: e.key, node: e.node, id: e.record.id, term, fit, ws: null, expected: -1, closing: false, timer: 0 };
  debug.stream = { start: -1, bytes: "", screens: 0 };
  const v = view;
  term.onData((data) => send(v, { t: "input", data }));
  term.onResize(({ rows, cols }) => {
    if (config.role === "observer") return;
    clearTimeout(v.timer);
    v.timer = setTimeout(() => send(v, { t: "resize", rows, cols }), 120);
  });
  v.onResize = () => fit.fit();
  window.addEventListener("resize", v.onResize);
  $("#term-note").textContent = config.role === "observer" ? "read-only: the node refuses typing from an observer (forbidden)" : "";
  connectView(v);
}

function send(v, message) {
  if (v.ws && v.ws.readyState === WebSocket.OPEN) v.ws.send(JSON.stringify(message));
}

function connectView(v) {
  const q = new URLSearchParams({ node: v.node, id: v.id });
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws/term?${q}`);
  ws.binaryType = "arraybuffer";
  v.ws = ws;
  ws.onopen = () => {
    $("#term-note").textContent = config.role === "observer" ? "read-only: the node refuses typing from an observer (forbidden)" : "";
    const hello = { t: "hello", rows: v.term.rows, cols: v.term.cols };
    if (v.expected >= 0) hello.offset = v.expected; // a dropped view goes on where it stopped
    ws.send(JSON.stringify(hello));
  };
  ws.onmessage = (ev) => {
    if (typeof ev.data === "string") {
      const m = JSON.parse(ev.data);
      if (m.t === "screen") {
        const rows = m.screen.split("\n");
        v.term.reset();
        v.term.write(rows.join("\r\n") + `\x1b[${m.cursor.row + 1};${m.cursor.col + 1}H`);
        v.expected = m.offset;
        debug.stream = { start: m.offset, bytes: "", screens: debug.stream.screens + 1 };
      } else if (m.t === "error") {
        $("#term-note").textContent = `${m.message}`;
        if (m.fatal) v.closing = true; // e.g. the session is not live: nothing to reconnect to
        toast(m.message);
      } else if (m.t === "ended") {
        $("#term-note").textContent = `the session is ${m.state}`;
      }
      return;
    }
    const buf = new Uint8Array(ev.data);
    const offset = Number(new DataView(ev.data).getBigUint64(0));
    let data = buf.subarray(8);
    const end = offset + data.length;
    if (end <= v.expected) return;
    if (offset < v.expected) data = data.subarray(v.expected - offset);
    v.expected = end;
    v.term.write(data);
    let s = "";
    for (const b of data) s += String.fromCharCode(b);
    debug.stream.bytes += s;
  };
  ws.onclose = () => {
    if (v.closing || view !== v) return;
    $("#term-note").textContent = "connection lost; catching up from the transcript…";
    setTimeout(() => { if (view === v && !v.closing) connectView(v); }, 500);
  };
}

debug.size = () => (view ? { rows: view.term.rows, cols: view.term.cols } : null);
debug.dropTerminal = () => { if (view && view.ws) view.ws.close(); };
debug.screenText = () => {
  if (!view) return "";
  const buf = view.term.buffer.active;
  const lines = [];
  for (let i = 0; i < buf.length; i++) lines.push(buf.getLine(i).translateToString(true));
  return lines.join("\n");
};

listSocket();
