// The client against a scripted server on 127.0.0.1: each request is answered by the next
// handler of a script, so every drop, reconnect and answer is exactly the one the test means.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { Client, CallbackdError, ReplayExpiredError } from "../src/index.js";

const RUN = "run-1";

function ev(seq, type, extra = {}) {
  return { type, seq, run_id: RUN, at: "2026-01-01T00:00:00Z", ...extra };
}
/** A durable event's SSE block. */
function durable(seq, type, extra) {
  return `id: ${seq}\ndata: ${JSON.stringify(ev(seq, type, extra))}\n\n`;
}
/** A control or token event's block: no id line. */
function control(seq, type, extra) {
  return `data: ${JSON.stringify(ev(seq, type, extra))}\n\n`;
}
const TERMINAL = (seq) => durable(seq, "completed", { status: "finished", usage: {}, output: "done" });

/** Starts a server answering the n-th request with script[n](req, res, body). */
async function serve(script) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      requests.push({ method: req.method, url: req.url, auth: req.headers.authorization, body, at: Date.now() });
      const h = script[requests.length - 1];
      if (!h) {
        res.writeHead(500).end("no more script");
        return;
      }
      h(req, res, body);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    requests,
    client: new Client({ baseUrl: url, token: "tok" }),
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

/** Answers an SSE stream of `blocks`, then ends it cleanly. */
const stream = (...blocks) => (req, res) => {
  res.writeHead(200, { "Content-Type": "text/event-stream" });
  for (const b of blocks) res.write(b);
  res.end();
};
/** Answers `blocks`, then half of `cut`, then destroys the connection mid-event. */
const cutAfter = (blocks, cut) => (req, res) => {
  res.writeHead(200, { "Content-Type": "text/event-stream" });
  for (const b of blocks) res.write(b);
  res.write(cut.slice(0, Math.floor(cut.length / 2)));
  setTimeout(() => res.destroy(), 20);
};
const json = (status, body) => (req, res) => {
  res.writeHead(status, { "Content-Type": status >= 400 ? "application/problem+json" : "application/json" });
  res.end(JSON.stringify(body));
};

async function collect(iterable) {
  const out = [];
  for await (const e of iterable) out.push(e);
  return out;
}
const seqs = (events) => events.filter((e) => !["token", "up_to_date", "reconnect", "stream_gap"].includes(e.type)).map((e) => e.seq);

test("a stream cut mid-event resumes after the last durable seq, and each seq is yielded once", async () => {
  const s = await serve([
    cutAfter([`retry: 30\n\n`, durable(1, "run_started"), durable(2, "step"), control(2, "token", { text: "he", delta: 1 })],
      durable(3, "message_snapshot")),
    // The server may send again what the client already has: it is dropped.
    cutAfter([durable(2, "step"), durable(3, "message_snapshot", { text: "hello" })], durable(4, "usage")),
    stream(durable(4, "usage"), TERMINAL(5), durable(6, "step")),
  ]);
  try {
    const events = await collect(s.client.followRun(RUN));
    assert.deepEqual(seqs(events), [1, 2, 3, 4, 5]); // nothing after the terminal event
    assert.equal(events.at(-1).type, "completed");
    assert.deepEqual(s.requests.map((r) => r.url), [
      `/v1/runs/${RUN}/stream?after=0`, `/v1/runs/${RUN}/stream?after=2`, `/v1/runs/${RUN}/stream?after=3`]);
    assert.ok(s.requests.every((r) => r.auth === "Bearer tok"));
    // The server's `retry: 30` replaced the 1 s default.
    assert.ok(s.requests[2].at - s.requests[1].at < 1000);
  } finally {
    await s.close();
  }
});

test("tokens and control events never move the position", async () => {
  const s = await serve([
    cutAfter([durable(1, "run_started"), control(1, "token", { text: "a", delta: 1 }), control(1, "up_to_date", { last_seq: 1 }),
      control(1, "token", { text: "b", delta: 2 })], control(1, "token", { text: "c", delta: 3 })),
    stream(TERMINAL(2)),
  ]);
  try {
    const events = await collect(s.client.followRun(RUN, { after: 0 }));
    assert.deepEqual(events.map((e) => e.type), ["run_started", "token", "up_to_date", "token", "completed"]);
    assert.equal(s.requests[1].url, `/v1/runs/${RUN}/stream?after=1`);
  } finally {
    await s.close();
  }
});

test("reconnect: waits its retry_ms, then asks for after_seq", async () => {
  const s = await serve([
    // A `retry:` of 10 ms earlier in the stream: the reconnect's own retry_ms wins.
    stream(`retry: 10\n\n`, durable(1, "run_started"), control(1, "reconnect", { after_seq: 1, retry_ms: 250 })),
    stream(TERMINAL(2)),
  ]);
  try {
    const events = await collect(s.client.followRun(RUN));
    assert.deepEqual(events.map((e) => e.type), ["run_started", "reconnect", "completed"]);
    assert.equal(s.requests[1].url, `/v1/runs/${RUN}/stream?after=1`);
    assert.ok(s.requests[1].at - s.requests[0].at >= 240, "reconnected before retry_ms");
  } finally {
    await s.close();
  }
});

test("stream_gap: the client reconnects from its last durable seq", async () => {
  const s = await serve([
    stream(durable(1, "run_started"), durable(2, "step"), control(2, "stream_gap", { after_seq: 2, reason: "missing" })),
    stream(durable(3, "step"), TERMINAL(4)),
  ]);
  try {
    const events = await collect(s.client.followRun(RUN));
    assert.deepEqual(seqs(events), [1, 2, 3, 4]);
    assert.ok(events.some((e) => e.type === "stream_gap"));
    assert.equal(s.requests[1].url, `/v1/runs/${RUN}/stream?after=2`);
  } finally {
    await s.close();
  }
});

test("a stream that ends before the run does is followed again, with backoff but without limit", async () => {
  const s = await serve([
    stream(`retry: 10\n\n`, durable(1, "run_started")),
    json(503, { code: "unavailable", detail: "restarting" }),
    stream(),
    stream(TERMINAL(2)),
  ]);
  try {
    assert.deepEqual(seqs(await collect(s.client.followRun(RUN))), [1, 2]);
    assert.deepEqual(s.requests.map((r) => r.url.split("=")[1]), ["0", "1", "1", "1"]);
  } finally {
    await s.close();
  }
});

test("204 ends the iteration; a 204 after a drop ends it too", async () => {
  const s = await serve([
    (req, res) => res.writeHead(204).end(),
    cutAfter([`retry: 10\n\n`, durable(4, "usage")], TERMINAL(5)),
    (req, res) => res.writeHead(204).end(),
  ]);
  try {
    assert.deepEqual(await collect(s.client.followRun(RUN, { after: 9 })), []);
    assert.equal(s.requests[0].url, `/v1/runs/${RUN}/stream?after=9`);
    assert.deepEqual(seqs(await collect(s.client.followRun(RUN, { after: 3 }))), [4]);
    assert.equal(s.requests[2].url, `/v1/runs/${RUN}/stream?after=4`);
  } finally {
    await s.close();
  }
});

test("410 throws ReplayExpiredError; other refusals throw CallbackdError without retrying", async () => {
  const s = await serve([
    json(410, { code: "replay_expired", status: 410, detail: "the events were removed" }),
    json(404, { code: "not_found", status: 404, detail: "no run nope" }),
  ]);
  try {
    const e = await collect(s.client.followRun(RUN)).catch((e) => e);
    assert.ok(e instanceof ReplayExpiredError && e instanceof CallbackdError, String(e));
    assert.equal(e.status, 410);
    assert.equal(e.code, "replay_expired");
    assert.equal(e.message, "the events were removed");
    const n = await collect(s.client.followRun("nope")).catch((e) => e);
    assert.ok(n instanceof CallbackdError && !(n instanceof ReplayExpiredError));
    assert.equal(n.code, "not_found");
    assert.equal(s.requests.length, 2);
  } finally {
    await s.close();
  }
});

test("sendMessage posts once and resumes a dropped turn with the run's GET stream", async () => {
  const s = await serve([
    cutAfter([`retry: 10\n\n`, durable(1, "run_started"), control(1, "token", { text: "x", delta: 1 })], durable(2, "message_snapshot")),
    stream(durable(2, "message_snapshot"), TERMINAL(3)),
  ]);
  try {
    const events = await collect(s.client.sendMessage("sess 1", "hello"));
    assert.deepEqual(seqs(events), [1, 2, 3]);
    assert.deepEqual(s.requests.map((r) => `${r.method} ${r.url}`), [
      "POST /v1/sessions/sess%201/messages", `GET /v1/runs/${RUN}/stream?after=1`]);
    assert.deepEqual(JSON.parse(s.requests[0].body), { text: "hello" });
  } finally {
    await s.close();
  }
});

test("sendMessage whose stream broke before run_started finds its run and never posts again", async () => {
  const s = await serve([
    (req, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write("id: 1\ndata: {\"type\":\"run_sta");
      setTimeout(() => res.destroy(), 20);
    },
    json(200, { session_id: "s", active_run_id: RUN }),
    stream(durable(1, "run_started"), TERMINAL(2)),
  ]);
  try {
    assert.deepEqual(seqs(await collect(s.client.sendMessage("s", "hi"))), [1, 2]);
    assert.deepEqual(s.requests.map((r) => `${r.method} ${r.url}`), [
      "POST /v1/sessions/s/messages", "GET /v1/sessions/s", `GET /v1/runs/${RUN}/stream?after=0`]);
  } finally {
    await s.close();
  }
});

test("a refused message throws with the server's reason", async () => {
  const s = await serve([json(409, { code: "failed_precondition", detail: "run r is active; cancel it" })]);
  try {
    const e = await collect(s.client.sendMessage("s", "hi")).catch((e) => e);
    assert.ok(e instanceof CallbackdError);
    assert.equal(e.status, 409);
    assert.match(e.message, /cancel it/);
    assert.equal(s.requests.length, 1);
  } finally {
    await s.close();
  }
});

test("an aborted signal stops the stream, and break closes the connection", async () => {
  const s = await serve([
    (req, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(durable(1, "run_started"));
    },
    (req, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(durable(1, "run_started"));
      req.socket.on("close", () => (s.closed = true));
    },
  ]);
  try {
    const ac = new AbortController();
    const seen = [];
    const e = await (async () => {
      for await (const ev of s.client.followRun(RUN, { signal: ac.signal })) {
        seen.push(ev.seq);
        ac.abort(new Error("stop"));
      }
    })().catch((e) => e);
    assert.equal(e.message, "stop");
    assert.deepEqual(seen, [1]);
    for await (const ev of s.client.followRun(RUN)) {
      assert.equal(ev.seq, 1);
      break;
    }
    for (let i = 0; i < 100 && !s.closed; i++) await new Promise((r) => setTimeout(r, 10));
    assert.ok(s.closed, "the connection stayed open after break");
  } finally {
    await s.close();
  }
});

test("the plain calls send the token, their body, and answer the JSON; errors are CallbackdError", async () => {
  const s = await serve([
    json(201, { session: { session_id: "s" }, tools: ["echo"] }),
    json(200, { run_id: RUN, status: "finished" }),
    json(200, { runs: [] }),
    json(200, { sessions: [] }),
    (req, res) => res.writeHead(202).end(),
    json(200, { approvals: [] }),
    json(200, { id: "a", state: "denied" }),
    json(201, { session: { session_id: "f" }, tools: [], blobs_copied: 3 }),
    json(200, { forks: [] }),
    json(200, { forks: [] }),
    json(401, { code: "unauthenticated", detail: "bad token" }),
  ]);
  try {
    const c = new Client({ baseUrl: `${s.url}/v1/`, token: "tok" });
    assert.deepEqual(await c.createSession({ tools: ["echo"] }), { session: { session_id: "s" }, tools: ["echo"] });
    assert.equal((await c.getRun(RUN)).status, "finished");
    await c.listRuns("s", { limit: 5 });
    await c.listSessions({ limit: 2, cursor: "x y" });
    assert.equal(await c.cancelRun(RUN), undefined);
    await c.listApprovals({ state: "all" });
    assert.equal((await c.decideApproval("a", { decision: "deny", reason: "no" })).state, "denied");
    assert.equal((await c.forkSession("s", { run_id: RUN, at: "after" })).blobs_copied, 3);
    assert.deepEqual(await c.listSessionForks("s"), { forks: [] });
    assert.deepEqual(await c.listRunForks(RUN), { forks: [] });
    const e = await c.getRun(RUN).catch((e) => e);
    assert.ok(e instanceof CallbackdError && e.status === 401 && e.code === "unauthenticated");
    assert.deepEqual(s.requests.map((r) => `${r.method} ${r.url}`), [
      "POST /v1/sessions", `GET /v1/runs/${RUN}`, "GET /v1/sessions/s/runs?limit=5", "GET /v1/sessions?limit=2&cursor=x%20y",
      `POST /v1/runs/${RUN}/cancel`, "GET /v1/approvals?state=all", "POST /v1/approvals/a",
      "POST /v1/sessions/s/fork", "GET /v1/sessions/s/forks", `GET /v1/runs/${RUN}/forks`, `GET /v1/runs/${RUN}`]);
    assert.deepEqual(JSON.parse(s.requests[0].body), { tools: ["echo"] });
    assert.deepEqual(JSON.parse(s.requests[6].body), { decision: "deny", reason: "no" });
    assert.deepEqual(JSON.parse(s.requests[7].body), { run_id: RUN, at: "after" });
  } finally {
    await s.close();
  }
});

test("a connection that goes silent is dropped after idleTimeoutMs and resumed", async () => {
  const s = await serve([
    (req, res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write(`retry: 10\n\n` + durable(1, "run_started"));  // then nothing, and the socket stays open
    },
    stream(TERMINAL(2)),
  ]);
  try {
    const c = new Client({ baseUrl: s.url, token: "tok", idleTimeoutMs: 300 });
    assert.deepEqual(seqs(await collect(c.followRun(RUN))), [1, 2]);
    assert.equal(s.requests[1].url, `/v1/runs/${RUN}/stream?after=1`);
  } finally {
    await s.close();
  }
});
