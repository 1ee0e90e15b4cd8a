// Fake Cursor backend (loopback) for driving the cursor-sdk bridge's local agent runtime.
// Usage: $NODE fakebackend.mjs PORT LOGFILE [SCENARIO]      ($NODE = the bridge's bin/node)
//   PORT 0 picks a free port; the "listening on 127.0.0.1:<port>" line on stderr names it.
//   LOGFILE gets one JSON line per request and per stream message ("-" = stdout).
//   SCENARIO: auto (default) | text | tool | thinking | error | toolerror   (see scenarios.mjs)
// Needs the cache built by tests/e2e/setup.sh (FAKEBACKEND_CACHE, default <repo>/target/e2e/fbcache).
// Copied into callbackd's tests from the project's fake backend; the tests use nothing outside this folder.
import http from "node:http";
import fs from "node:fs";
import { T } from "./protoreg.mjs";

if (process.argv.length < 4) {
  console.error("usage: node fakebackend.mjs PORT LOGFILE [auto|text|tool|thinking|error|toolerror]");
  process.exit(2);
}
const PORT = Number(process.argv[2]);
const LOG = process.argv[3] === "-" ? process.stdout : fs.createWriteStream(process.argv[3], { flags: "a" });
const SCENARIO = process.argv[4] || process.env.FB_SCENARIO || "auto";
// Server heartbeats, as the real backend sends them: the SDK's stall detector aborts a run stream
// after 30 s without any server message and retries the turn (re-running its tools); an
// interaction_update.heartbeat (agent.v1.HeartbeatUpdate) resets it. One is sent whenever a stream
// has sent nothing for FB_HEARTBEAT_MS (default 5000; 0 = never, the old behaviour).
const HEARTBEAT_MS = Number(process.env.FB_HEARTBEAT_MS ?? 5000);
const log = (o) => LOG.write(JSON.stringify({ t: Date.now(), ...o }, (k, v) => (typeof v === "bigint" ? v.toString() : v)) + "\n");

const AgentClientMessage = T("agent.v1.AgentClientMessage");
const AgentServerMessage = T("agent.v1.AgentServerMessage");
const BidiAppendRequest = T("aiserver.v1.BidiAppendRequest");
const BidiRequestId = T("aiserver.v1.BidiRequestId");

function toJ(m) { try { return m.toJson({ emitDefaultValues: false }); } catch (e) { return { jsonErr: String(e) }; } }

// ---- Connect envelope helpers ----
function frame(flags, payload) {
  const b = Buffer.alloc(5 + payload.length);
  b[0] = flags; b.writeUInt32BE(payload.length, 1); Buffer.from(payload).copy(b, 5); return b;
}
function unframe(buf) {
  const out = []; let o = 0;
  while (o + 5 <= buf.length) { const f = buf[o], n = buf.readUInt32BE(o + 1); out.push({ flags: f, data: buf.subarray(o + 5, o + 5 + n) }); o += 5 + n; }
  return out;
}

// ---- Streams: one RunSSE response plus the BidiAppend inputs with the same request id ----
const streams = new Map(); // requestId -> {res, inbox: [], waiters: [], closed}
function getStream(id) {
  let s = streams.get(id);
  if (!s) { s = { id, res: null, inbox: [], waiters: [], closed: false, pendingOut: [], lastSent: 0, hb: null }; streams.set(id, s); }
  return s;
}
function pushInbox(s, msg) { const w = s.waiters.shift(); if (w) w(msg); else s.inbox.push(msg); }
function nextClientMsg(s, pred = () => true, timeoutMs = 30000) {
  return new Promise((resolve, reject) => {
    const idx = s.inbox.findIndex(pred);
    if (idx >= 0) return resolve(s.inbox.splice(idx, 1)[0]);
    const t = setTimeout(() => reject(new Error("timeout waiting client msg")), timeoutMs);
    const w = (m) => { if (pred(m)) { clearTimeout(t); resolve(m); } else { s.inbox.push(m); s.waiters.push(w); } };
    s.waiters.push(w);
  });
}
function send(s, init) {
  const m = init instanceof AgentServerMessage ? init : new AgentServerMessage(init);
  log({ dir: "S->C", rid: s.id, msg: toJ(m) });
  const b = frame(0, m.toBinary());
  s.lastSent = Date.now();
  if (s.res) s.res.write(b); else s.pendingOut.push(b);
}
function startHeartbeats(s) {
  if (!(HEARTBEAT_MS > 0) || s.hb) return;
  s.lastSent = Date.now();
  s.hb = setInterval(() => {
    if (s.closed || !s.res || s.res.destroyed) return stopHeartbeats(s);
    if (Date.now() - s.lastSent >= HEARTBEAT_MS)
      send(s, { message: { case: "interactionUpdate", value: { message: { case: "heartbeat", value: {} } } } });
  }, Math.min(1000, HEARTBEAT_MS));
}
function stopHeartbeats(s) { if (s.hb) { clearInterval(s.hb); s.hb = null; } }
function endStream(s, err) {
  if (s.closed) return; s.closed = true;
  stopHeartbeats(s);
  const trailer = err ? { error: err } : {};
  log({ dir: "S->C", rid: s.id, end: trailer });
  s.res?.end(frame(2, Buffer.from(JSON.stringify(trailer))));
}

const scenarios = {};
export function registerScenario(name, fn) { scenarios[name] = fn; }
const scenarioMod = await import("./scenarios.mjs");
let controlHandler = () => null;
scenarioMod.register(registerScenario, { send, endStream, nextClientMsg, log, T, onControl: (fn) => { controlHandler = fn; } });

// ---- HTTP ----
function readBody(req) { return new Promise((r) => { const c = []; req.on("data", (d) => c.push(d)); req.on("end", () => r(Buffer.concat(c))); }); }
function reply(res, code, ct, body) { res.writeHead(code, { "content-type": ct, "content-length": Buffer.byteLength(body) }); res.end(body); }

const server = http.createServer(async (req, res) => {
  const body = await readBody(req);
  const ct = req.headers["content-type"] || "";
  const path = req.url.split("?")[0];
  const entry = { m: req.method, path, ct, len: body.length };
  try {
    if (path.startsWith("/__fake/")) {          // test-harness control plane (not part of Cursor's API)
      const out = controlHandler(path, body.toString("utf8") || "{}");
      log({ ...entry, control: true, out });
      return out ? reply(res, 200, "application/json", JSON.stringify(out)) : reply(res, 404, "application/json", "{}");
    }
    if (path === "/auth/exchange_user_api_key") { log(entry); return reply(res, 200, "application/json", JSON.stringify({ accessToken: "fake-access-token" })); }
    if (path.startsWith("/v1/models")) { log(entry); return reply(res, 200, "application/json", JSON.stringify({ items: [{ id: "composer-2", displayName: "Composer 2" }] })); }
    if (path.startsWith("/v1/me")) { log(entry); return reply(res, 200, "application/json", JSON.stringify({ apiKeyName: "fake", userEmail: "fake@example.com" })); }
    if (path === "/agent.v1.AgentService/RunSSE") {
      const frames = unframe(body);
      const rid = BidiRequestId.fromBinary(frames[0]?.data ?? new Uint8Array()).requestId;
      log({ ...entry, rid, headers: req.headers });
      const s = getStream(rid);
      s.res = res;
      res.writeHead(200, { "content-type": "application/connect+proto" });
      res.flushHeaders();
      for (const b of s.pendingOut.splice(0)) res.write(b);
      req.on("close", () => { log({ ev: "runsse-closed", rid }); });
      res.on("close", () => { stopHeartbeats(s); if (!s.closed) log({ ev: "runsse-dropped", rid }); });
      startHeartbeats(s);
      if (!s.started) { s.started = true; runScenario(s); }
      return;
    }
    if (path === "/aiserver.v1.BidiService/BidiAppend") {
      const a = BidiAppendRequest.fromBinary(body);
      const rid = a.requestId?.requestId;
      const data = a.dataBinary?.length ? a.dataBinary : Buffer.from(a.data, "hex");
      const cm = AgentClientMessage.fromBinary(data);
      log({ ...entry, rid, seq: a.appendSeqno, dir: "C->S", msg: toJ(cm) });
      const s = getStream(rid);
      pushInbox(s, cm);
      if (!s.started && s.res) { s.started = true; runScenario(s); }
      return reply(res, 200, "application/proto", Buffer.alloc(0));
    }
    // Everything else: empty (default) message. proto -> empty body, json -> {}
    log({ ...entry, body: ct.includes("json") ? body.toString("utf8").slice(0, 2000) : body.toString("base64").slice(0, 4000), default: true });
    if (ct.includes("connect+")) { res.writeHead(200, { "content-type": ct }); return res.end(frame(2, Buffer.from("{}"))); }
    if (ct.includes("json")) return reply(res, 200, "application/json", "{}");
    return reply(res, 200, ct || "application/proto", Buffer.alloc(0));
  } catch (e) {
    log({ ...entry, error: String(e.stack || e) });
    reply(res, 500, "application/json", JSON.stringify({ code: "internal", message: String(e) }));
  }
});

async function runScenario(s) {
  const fn = scenarios[SCENARIO];
  try { await fn(s); } catch (e) { log({ ev: "scenario-error", rid: s.id, error: String(e.stack || e) }); endStream(s, { code: "internal", message: String(e) }); }
}

if (!scenarios[SCENARIO]) { console.error(`unknown scenario ${SCENARIO}; known: ${Object.keys(scenarios).join(", ")}`); process.exit(2); }
server.on("error", (e) => { console.error(`fakebackend: ${e.message}`); process.exit(1); });
server.listen(PORT, "127.0.0.1", () => console.error(`fakebackend listening on 127.0.0.1:${server.address().port} scenario=${SCENARIO}`));
