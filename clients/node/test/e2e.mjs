// End to end against a running node: node test/e2e.mjs <state-dir> [<workdir>]
// Prints one JSON summary line and exits 0, or prints why it failed and exits 1.
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { connect } from "../roost.mjs";

const stateDir = resolve(process.argv[2] ?? process.env.ROOST_STATE_DIR ?? "");
const workdir = resolve(process.argv[3] ?? join(dirname(stateDir), "node-client-work"));
const NAME = `node-e2e-${process.pid}`, RENAMED = `${NAME}-renamed`;
const FIRST = "hello from node", SECOND = "second prompt from node";
const started = Date.now();
const timings = {};
const mark = (what) => { timings[what] = Date.now() - started; };

function check(cond, what, extra) {
  if (!cond) throw new Error(`check failed: ${what}${extra === undefined ? "" : ` (${JSON.stringify(extra)})`}`);
}

async function until(cond, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function waitScreen(client, id, text, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  let screen = "";
  while (Date.now() < deadline) {
    screen = (await client.show(id, { screen: true })).screen ?? "";
    if (screen.includes(text)) return screen;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${JSON.stringify(text)} not on the screen of ${id} in ${timeoutMs} ms; screen: ${JSON.stringify(screen)}`);
}

async function main() {
  mkdirSync(workdir, { recursive: true });

  // 1. connect, initialize, spawn an echo session in pty mode
  const a = await connect({ stateDir, client: "roost-node-e2e" });
  check(a.init.version === 1 && /^[0-9a-f]{16}$/.test(a.init.connection_id), "initialize reply", a.init);
  const record = await a.spawn("echo", workdir, { mode: "pty", name: NAME });
  check(record.state === "live" && record.generation === 1 && record.mode === "pty", "spawned live", record);
  const rid = record.id;
  mark("spawned");

  // errors come back as Errors with the spec's codes
  const codeOf = (promise) => promise.then(() => "no error", (err) => err.code);
  const errors = {
    unauthorized: await codeOf(connect({ stateDir, token: "not-the-token" })),
    "unknown-method": await codeOf(a.call("no.such.method")),
    "not-found": await codeOf(a.show("r0000000000")),
    "stale-generation": await codeOf(a.prompt(rid, "fenced out", { generation: 7 })),
  };
  for (const [code, got] of Object.entries(errors)) check(got === code, `error ${code}`, errors);

  // 2. subscribe first, catch up from the log, then prompt: the input event arrives on the SUB
  const sub = await a.subscribe("e/", { after: 0 });
  check(sub.delivered.some((e) => e.kind === "record.created" && e.record === rid), "catch-up has record.created");
  const accepted = await a.prompt(rid, FIRST, { generation: 1 });
  check(accepted.accepted === true && accepted.record === rid && accepted.generation === 1, "prompt accepted", accepted);
  const input = await sub.waitFor((e) => e.seq === accepted.seq, 10_000, `event ${accepted.seq}`);
  check(input.kind === "session.input" && input.record === rid, "the prompt's event", input);
  check(input.data.input === "prompt" && input.data.text === FIRST, "the prompt's event data", input);
  await until(() => sub.pubSeqs.has(accepted.seq), 5_000, "session.input on the PUB socket");
  const screen = await waitScreen(a, rid, `echo: ${FIRST}`);
  mark("answered");

  // 3. everything up to now processed; record the last seq, then disconnect
  await sub.catchUp();
  const delivered = sub.delivered.map((e) => e.seq);
  check(new Set(delivered).size === delivered.length, "no duplicate deliveries", delivered);
  check(delivered.every((s, i) => s === i + 1), "delivered seqs contiguous from 1", delivered);
  const lastSeq = sub.lastSeq;
  await a.close();
  mark("disconnected");

  // 4. while disconnected: a second, short-lived connection prompts again and renames the record
  const b = await connect({ stateDir, client: "roost-node-e2e-other" });
  const op = `op-node-e2e-${process.pid}-${Date.now()}`;
  const second = await b.prompt(rid, SECOND, { op });
  check(second.seq > lastSeq, "second prompt after the recorded seq", { second, lastSeq });
  const repeat = await b.prompt(rid, SECOND, { op }); // the same operation id: answered, not typed again
  check(repeat.duplicate === true && repeat.seq === second.seq && repeat.op?.id === op, "repeated op", repeat);
  check(repeat.record === rid && repeat.op?.record === rid && repeat.op?.method === "session.prompt",
    "a repeat names the first operation's record and method", repeat);
  await waitScreen(b, rid, `echo: ${SECOND}`);
  const renamed = await b.rename(rid, RENAMED);
  check(renamed.name === RENAMED, "renamed", renamed);
  await b.close();
  mark("missed");

  // 5. reconnect: subscribe first (PUB events held), then events.since from the recorded seq in
  // small pages, merged with whatever the SUB got meanwhile, de-duplicated by seq
  const c = await connect({ stateDir, client: "roost-node-e2e" });
  const sub2 = await c.subscribe("e/", { hold: true });
  const missed = { events: await sub2.catchUp(lastSeq, { limit: 2 }) };
  missed.lastSeq = (await c.eventsSince(0, { limit: 1 })).last_seq;
  const seqs = missed.events.map((e) => e.seq);
  check(!sub2.gap, "no gap");
  check(seqs.length > 0 && seqs.every((s, i) => s === lastSeq + 1 + i), "missed seqs contiguous from last + 1", { lastSeq, seqs });
  check(missed.lastSeq >= seqs[seqs.length - 1], "last_seq covers the missed events", missed.lastSeq);
  const missedInput = missed.events.find((e) => e.kind === "session.input" && e.record === rid);
  check(missedInput && missedInput.seq === second.seq && missedInput.data.text === SECOND, "missed session.input", missed.events);
  check(missed.events.filter((e) => e.kind === "session.input").length === 1, "the repeat logged nothing", missed.events);
  const missedRename = missed.events.find((e) => e.kind === "record.renamed" && e.record === rid);
  check(missedRename && missedRename.data.from === NAME && missedRename.data.to === RENAMED, "missed record.renamed", missed.events);
  const recordSub = await c.subscribe(`e/${rid}/`, { after: lastSeq }); // one record: events.since with id
  const mine = missed.events.filter((e) => e.record === rid).map((e) => e.seq);
  // the record's events up to the last one missed are those; later ones (its screen classified
  // after the prompt's output) may have come since
  const upTo = seqs[seqs.length - 1];
  const recordSeqs = recordSub.delivered.map((e) => e.seq);
  check(JSON.stringify(recordSeqs.filter((s) => s <= upTo)) === JSON.stringify(mine), "per-record catch-up", recordSub.delivered);
  check(recordSub.delivered.every((e) => e.record === rid), "per-record catch-up is the record's alone", recordSub.delivered);
  mark("resynced");

  // 6. stop (fenced by generation); the live stream goes on from what was resynced, and a
  // subscription that only knows `lastSeq` fills the hole from the log at its first PUB event
  const sub3 = await c.subscribe("e/", { lastSeq });
  const stopped = await c.stop(rid, { graceMs: 1000, generation: 1 });
  check(stopped.state === "dormant" && stopped.active === null, "stopped dormant", stopped);
  const dormant = await sub2.waitFor((e) => e.kind === "record.state" && e.record === rid && e.data.to === "dormant", 10_000, "record.state to dormant");
  const all = sub2.delivered.map((e) => e.seq);
  check(all.every((s, i) => s === lastSeq + 1 + i), "every seq once, in order, after the recorded one", all);
  const after = all.slice(seqs.length);
  await recordSub.waitFor((e) => e.seq === dormant.seq, 10_000, "the dormant event on the record's subscription");
  check(recordSub.delivered.every((e) => e.record === rid), "only the record's events", recordSub.delivered);
  await sub3.waitFor((e) => e.seq === dormant.seq, 10_000, "the dormant event on the hole-filling subscription");
  const filled = sub3.delivered.map((e) => e.seq).filter((s) => s <= dormant.seq);
  check(filled.length === dormant.seq - lastSeq && filled.every((s, i) => s === lastSeq + 1 + i), "hole filled", filled);
  await c.close();
  mark("stopped");

  console.log(JSON.stringify({
    ok: true, record: rid, name: NAME, renamed: RENAMED, generation: 1, prompt_seq: accepted.seq, last_seq: lastSeq,
    missed_seqs: seqs, missed_kinds: missed.events.map((e) => e.kind), second_seq: second.seq,
    rename_seq: missedRename.seq, dormant_seq: dormant.seq, live_seqs: after, filled_seqs: filled,
    screen_has_answer: screen.includes(`echo: ${FIRST}`), errors, timings_ms: timings,
  }));
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`e2e failed: ${err?.code ? `[${err.code}] ` : ""}${err?.stack ?? err}`);
    process.exit(1);
  },
);
