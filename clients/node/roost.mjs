// A minimal roost client, written from docs/PROTOCOL.md (wire protocol version 1) alone.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { Dealer, Subscriber } from "zeromq";
import { encode, decode } from "@msgpack/msgpack";

const VERSION = 1;
const pack = (value) => encode(value, { ignoreUndefined: true });
// Per-method client deadlines (section 2, "Requests and replies"): allow for the methods' own durations.
const DEADLINES = { "session.spawn": 30_000, "session.resume": 30_000, "session.stop": 75_000 };

export class RoostError extends Error {
  constructor(code, message, detail = {}) {
    super(`${code}: ${message}`);
    this.name = "RoostError";
    this.code = code;
    this.detail = detail;
  }
}

/** Read `<stateDir>/node.json` and the token, connect a DEALER and `initialize`. */
export async function connect({ stateDir, token, timeoutMs = 15_000, client = "roost-node" } = {}) {
  stateDir ??= process.env.ROOST_STATE_DIR;
  if (!stateDir) throw new RoostError("bad-request", "no state directory given");
  let info;
  try {
    info = JSON.parse(readFileSync(join(stateDir, "node.json"), "utf8"));
  } catch {
    throw new RoostError("node-not-running", `no node serves ${stateDir}`);
  }
  token ??= process.env.ROOST_TOKEN || readFileSync(join(stateDir, "token"), "utf8").trim();
  const c = new RoostClient(info, token, { timeoutMs, client });
  try {
    await c.initialize();
  } catch (err) {
    await c.close();
    throw err;
  }
  return c;
}

export class RoostClient {
  constructor(info, token, { timeoutMs, client }) {
    this.info = info;
    this.token = token;
    this.timeoutMs = timeoutMs;
    this.clientName = client;
    this.prefix = randomBytes(4).toString("hex");
    this.counter = 0;
    this.pending = new Map(); // request id -> {resolve, reject, timer}
    this.lastSent = null;
    this.sending = Promise.resolve(); // zeromq v6 allows one send in flight per socket
    this.subscriptions = new Set();
    this.closed = false;
    this.dealer = new Dealer({ linger: 0 });
    this.dealer.connect(info.endpoints.router);
    this.readLoop = this.#read();
  }

  async #read() {
    try {
      for await (const frames of this.dealer) {
        if (frames.length !== 2) continue;
        let header, body;
        try {
          [header, body] = [decode(frames[0]), decode(frames[1])];
        } catch {
          continue; // not ours to answer: drop what cannot be read
        }
        // An error with no id answers our most recent unreadable message (section 2).
        const id = header.id ?? (header.k === "error" ? this.lastSent : "");
        const waiter = this.pending.get(id);
        if (!waiter) continue; // a late answer to a request we gave up on
        this.pending.delete(id);
        clearTimeout(waiter.timer);
        if (header.k === "response") waiter.resolve(body);
        else if (header.k === "error") waiter.reject(new RoostError(body.code ?? "internal", body.message ?? "", body.detail ?? {}));
      }
    } catch (err) {
      if (!this.closed) for (const w of this.pending.values()) w.reject(err);
    }
  }

  #send(header, body, timeoutMs) {
    const id = `${this.prefix}:${++this.counter}`;
    const head = { v: VERSION, k: "request", id, t: "node", ...header };
    for (const key of Object.keys(head)) if (head[key] === undefined || head[key] === "") delete head[key];
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new RoostError("closed", "the client is closed"));
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new RoostError("timeout", `${head.m} got no reply in ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.sending = this.sending
        .then(() => { this.lastSent = id; return this.dealer.send([pack(head), pack(body)]); })
        .catch((err) => { clearTimeout(timer); this.pending.delete(id); reject(err); });
    });
  }

  /** `initialize` (served by the broker; section 3). Safe to call again on the same connection. */
  async initialize() {
    const body = { versions: [VERSION], token: this.token, client: this.clientName };
    this.init = await this.#send({ m: "initialize", t: "broker" }, body, this.timeoutMs);
    if (this.init.version !== VERSION) throw new RoostError("unsupported-version", `node chose ${this.init.version}`);
    return this.init;
  }

  /** Call a method; resolves to the reply body or rejects with a RoostError carrying `.code`. */
  async call(method, body = {}, { op, grant, generation, timeoutMs } = {}) {
    const header = { m: method, op, g: grant, s: generation === undefined ? undefined : { generation } };
    const deadline = timeoutMs ?? Math.max(this.timeoutMs, DEADLINES[method] ?? 0);
    try {
      return await this.#send(header, body, deadline);
    } catch (err) {
      if (err.code !== "not-initialized") throw err;
      await this.initialize(); // a broker restart forgot us: register again, then repeat once
      return await this.#send(header, body, deadline);
    }
  }

  static newOp() {
    return `op-${randomBytes(12).toString("hex")}`;
  }

  async spawn(provider, cwd, { mode = "pty", name, env, rows, cols, op = RoostClient.newOp() } = {}) {
    return (await this.call("session.spawn", { provider, cwd, mode, name, env, rows, cols }, { op })).record;
  }
  prompt(id, text, { op = RoostClient.newOp(), grant, generation } = {}) {
    return this.call("session.prompt", { id, text }, { op, grant, generation });
  }
  async stop(id, { graceMs, op = RoostClient.newOp(), grant, generation } = {}) {
    return (await this.call("session.stop", { id, grace_ms: graceMs }, { op, grant, generation })).record;
  }
  async rename(id, name, { op = RoostClient.newOp(), grant } = {}) {
    return (await this.call("session.rename", { id, name }, { op, grant })).record;
  }
  show(id, { screen = false } = {}) {
    return this.call("session.show", { id, screen });
  }
  eventsSince(after = 0, { limit, id } = {}) {
    return this.call("events.since", { after, limit, id });
  }

  /** Everything after `lastSeq`, page by page, de-duplicated by seq: `{events, lastSeq, gap}`. */
  async resync(lastSeq = 0, { limit = 1000, id } = {}) {
    const bySeq = new Map();
    let after = lastSeq, gap = false, last = lastSeq;
    for (;;) {
      const page = await this.eventsSince(after, { limit, id });
      gap ||= page.gap === true;
      last = Math.max(last, page.last_seq ?? 0);
      for (const e of page.events) if (e.seq > lastSeq && !bySeq.has(e.seq)) bySeq.set(e.seq, e);
      if (!(page.more ?? page.events.length >= limit)) break; // `more`: a page may be cut short by size
      after = page.events[page.events.length - 1].seq;
    }
    return { events: [...bySeq.values()].sort((a, b) => a.seq - b.seq), lastSeq: last, gap };
  }

  /**
   * A SUB on the events endpoint. With `after`, catches up from the log at once (slow-joiner rule,
   * section 5); with `hold`, PUB events wait for the first `catchUp()` (call it yourself). With `lastSeq` (the
   * last seq already processed), a hole after it is filled from the log when the next event comes.
   */
  async subscribe(prefix = "e/", { after, hold = false, lastSeq = null, handshakeMs = 5_000 } = {}) {
    const sub = new Subscription(this, prefix);
    sub.lastSeq = lastSeq;
    sub.syncing = hold || after !== undefined;
    this.subscriptions.add(sub);
    await sub.ready(handshakeMs);
    if (after !== undefined) await sub.catchUp(after);
    return sub;
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    for (const sub of this.subscriptions) sub.close();
    for (const w of this.pending.values()) { clearTimeout(w.timer); w.reject(new RoostError("closed", "the client is closed")); }
    this.pending.clear();
    this.dealer.close();
    await this.readLoop;
  }
}

/**
 * Events in seq order, each once. `lastSeq` is the last processed; an event past lastSeq + 1 on a
 * subscription covering all of `e/` fills the hole with events.since first (section 5).
 */
export class Subscription {
  constructor(client, prefix) {
    this.client = client;
    this.prefix = prefix;
    this.full = prefix === "" || prefix === "e/";
    this.recordId = /^e\/(r[0-9a-f]{10})\//.exec(prefix)?.[1]; // one record's events: catch up with `id`
    this.lastSeq = null; // the last processed seq; null until the first event or catch-up
    this.delivered = []; // event documents, in order
    this.output = []; // o/<record> bodies
    this.pubSeqs = new Set(); // seqs that arrived on the PUB socket (before de-duplication)
    this.waiters = new Set();
    this.syncing = false; // while true (subscribe with `after` or `hold`), PUB events wait in `early`
    this.early = [];
    this.socket = new Subscriber({ linger: 0 });
    this.handshake = new Promise((resolve) => this.socket.events.on("handshake", resolve));
    this.socket.connect(client.init.events);
    this.socket.subscribe(prefix);
    this.queue = Promise.resolve();
    this.loop = this.#read();
  }

  ready(ms) {
    return Promise.race([this.handshake, new Promise((r) => setTimeout(r, ms).unref())]);
  }

  async #read() {
    try {
      for await (const frames of this.socket) {
        if (frames.length !== 3) continue;
        const topic = frames[0].toString("utf8");
        let header, body;
        try { [header, body] = [decode(frames[1]), decode(frames[2])]; } catch { continue; }
        if (topic.startsWith("o/")) { this.output.push(body); this.#wake(); continue; }
        if (!topic.startsWith("e/") || typeof body.seq !== "number") continue;
        this.pubSeqs.add(body.seq);
        this.queue = this.queue.then(() => this.#take(body)).catch((err) => { this.error = err; this.#wake(); });
      }
    } catch {
      // closed
    }
  }

  async #take(event) {
    if (this.syncing) return void this.early.push(event); // held until the first catch-up is done
    if (this.lastSeq !== null && event.seq <= this.lastSeq) return; // a duplicate
    if (this.lastSeq !== null && this.full && event.seq > this.lastSeq + 1) await this.#catchUp(this.lastSeq);
    this.#deliver([event]);
  }

  #deliver(events) {
    for (const e of events) {
      if (this.lastSeq !== null && e.seq <= this.lastSeq) continue;
      this.delivered.push(e);
      this.lastSeq = e.seq;
    }
    this.#wake();
  }

  async #catchUp(after, limit) {
    const start = this.delivered.length;
    const { events, gap } = await this.client.resync(after, { limit, id: this.recordId });
    if (gap) this.gap = true; // retention dropped events: re-read state (session.list/show)
    if (this.lastSeq === null || this.lastSeq < after) this.lastSeq = after;
    this.#deliver(events);
    this.syncing = false;
    this.#deliver(this.early.splice(0).sort((a, b) => a.seq - b.seq));
    return this.delivered.slice(start);
  }

  /** Read the log after `after` (default: the last processed), in turn with the PUB events; returns the new events. */
  catchUp(after = this.lastSeq ?? 0, { limit } = {}) {
    const run = this.queue.then(() => this.#catchUp(after, limit));
    this.queue = run.catch(() => {});
    return run;
  }

  #wake() {
    for (const w of this.waiters) w();
  }

  /** Resolve with the first delivered event matching `pred`, or reject after `timeoutMs`. */
  waitFor(pred, timeoutMs = 10_000, what = "an event") {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.error) return finish(reject, this.error);
        const hit = this.delivered.find(pred);
        if (hit) finish(resolve, hit);
      };
      const timer = setTimeout(() => finish(reject, new RoostError("timeout", `no ${what} in ${timeoutMs} ms`)), timeoutMs);
      const finish = (fn, value) => { clearTimeout(timer); this.waiters.delete(check); fn(value); };
      this.waiters.add(check);
      check();
    });
  }

  close() {
    this.client.subscriptions.delete(this);
    this.socket.close();
  }
}
