// The console's logic without a browser (node --test tests/ui): the SSE reader, the run
// model, and the follower's resume rule against a scripted fetch. The browser test
// (tests/e2e/test_console_e2e.py) covers the page against the real daemon.
import { test } from "node:test";
import assert from "node:assert/strict";

// What the modules touch of a browser, outside the DOM.
const store = new Map();
globalThis.sessionStorage = {
  getItem: (k) => store.get(k) ?? null,
  setItem: (k, v) => store.set(k, String(v)),
  removeItem: (k) => store.delete(k),
};

const kept = new Map();
globalThis.localStorage = {
  getItem: (k) => kept.get(k) ?? null,
  setItem: (k, v) => kept.set(k, String(v)),
  removeItem: (k) => kept.delete(k),
};

const ASSETS = new URL("../../src/ui/assets/", import.meta.url);
const { readSse } = await import(new URL("sse.js", ASSETS));
const { RunModel, usageLine } = await import(new URL("run.js", ASSETS));
const { Follower } = await import(new URL("follow.js", ASSETS));
const api = await import(new URL("api.js", ASSETS));

function body(chunks, { error = false } = {}) {
  const enc = new TextEncoder();
  const queue = chunks.map((ch) => (typeof ch === "string" ? enc.encode(ch) : ch));
  // Pulled one chunk at a time, so an error comes after the reader took every chunk (an
  // error raised up front would discard the queued ones).
  return new ReadableStream({
    pull(c) {
      if (queue.length) c.enqueue(queue.shift());
      else if (error) c.error(new TypeError("network error"));
      else c.close();
    },
  });
}

const durable = (seq, ev) => `id: ${seq}\ndata: ${JSON.stringify({ seq, run_id: "r1", at: "2026-12-01T10:00:00Z", ...ev })}\n\n`;
const control = (ev) => `data: ${JSON.stringify({ run_id: "r1", ...ev })}\n\n`;

test("the SSE reader: ids only on id lines, any chunking, CRLF and CR", async () => {
  const text = "id: 1\r\ndata: {\"a\":1}\r\n\r\n: keepalive\n\ndata: {\"t\":\"x\"}\r\rid: 2\ndata: b\ndata: c\n\n";
  const whole = [];
  for await (const it of readSse(body([text]))) whole.push(it);
  assert.deepEqual(whole.map((i) => [i.type, i.id ?? null, i.data ?? i.text]), [
    ["event", "1", "{\"a\":1}"], ["comment", null, "keepalive"], ["event", null, "{\"t\":\"x\"}"], ["event", "2", "b\nc"],
  ]);
  const bytes = new TextEncoder().encode(text);
  for (let cut = 1; cut < bytes.length; cut++) {
    const got = [];
    for await (const it of readSse(body([bytes.slice(0, cut), bytes.slice(cut)]))) got.push(it);
    assert.deepEqual(got, whole, `split at ${cut}`);
  }
});

test("the run model: snapshots replace tokens, rows are keyed, tool outcomes", () => {
  const m = new RunModel("r1");
  m.apply({ type: "run_started", seq: 1, agent: { model: "composer-2" }, session_id: "s1" }, true);
  m.apply({ type: "token", seq: 1, text: "Hel", delta: 1 }, false);
  m.apply({ type: "token", seq: 1, text: "lo", delta: 2 }, false);
  m.apply({ type: "token", seq: 1, text: "lo", delta: 2 }, false); // a repeat
  assert.equal(m.pending.text, "Hello");
  m.apply({ type: "message_snapshot", seq: 2, message_id: "m1", text: "Hello.", delta: 2 }, true);
  assert.equal(m.pending, null);
  m.apply({ type: "tool_started", seq: 3, tool_call_id: "t1", tool: "echo" }, true);
  m.apply({ type: "tool_completed", seq: 4, tool_call_id: "t1", tool: "echo", outcome: "ok", duration_ms: 12 }, true);
  m.apply({ type: "tool_started", seq: 5, tool_call_id: "t2", tool: "sh" }, true);
  m.apply({ type: "tool_outcome_unknown", seq: 6, tool_call_id: "t2", tool: "sh", reason: "timed out" }, true);
  m.apply({ type: "error", seq: 7, status: "error", problem: { detail: "[internal] boom" }, usage: { inputTokens: 3 } }, true);
  assert.deepEqual(m.items.map((i) => i.key), ["seq:1", "msg:m1", "tool:t1", "tool:t2"]);
  assert.deepEqual(m.items.filter((i) => i.kind === "tool").map((i) => [i.state, i.durationMs ?? null]), [["ok", 12], ["unknown", null]]);
  assert.equal(m.terminal, true);
  assert.equal(m.error.detail, "[internal] boom");
  assert.equal(usageLine(m.usage), "input 3");
  assert.equal(usageLine({ totalTokens: 3, cacheReadTokens: 0, outputTokens: 1, inputTokens: 2 }), "input 2 · output 1 · cache read 0 · total 3");
  // The run document, read right after, may still say running: the stream's end stands.
  m.applySummary({ status: "running", tool_calls: [{ tool_call_id: "t3", tool: "slow", outcome: "cancelled", cut_off: false, arguments: { n: 1 }, result: null }] });
  assert.equal(m.status, "error");
  assert.equal(m.terminal, true);
  assert.equal(m.byKey.get("tool:t3").state, "cancelled");
  assert.deepEqual(m.byKey.get("tool:t3").args, { n: 1 });
  // A call still running when the run ends will never report: cancelled (the stream says so
  // too, with a tool_completed before the end).
  const c = new RunModel("r2");
  c.apply({ type: "tool_started", seq: 1, tool_call_id: "t", tool: "slow" }, true);
  c.apply({ type: "completed", seq: 2, status: "cancelled", output: "" }, true);
  assert.equal(c.byKey.get("tool:t").state, "cancelled");
});

test("a replayed run tells what ran, the decision and the answer (issue 35)", () => {
  const m = new RunModel("r1");
  m.apply({ type: "tool_started", seq: 1, tool_call_id: "t1", tool: "deploy", arguments: { version: "1.4.2" } }, true);
  m.apply({ type: "tool_completed", seq: 2, tool_call_id: "t1", tool: "deploy", outcome: "ok", duration_ms: 40, waited_ms: 6000,
    arguments: { version: "1.4.2-hotfix1" }, requested_arguments: { version: "1.4.2" }, result: { deployed: "1.4.2-hotfix1" },
    decision: { approval_id: "a1", decision: "approved", by: "default/alice", at: "2026-12-01T10:00:00Z", reason: null, edited: true } }, true);
  const tool = m.byKey.get("tool:t1");
  assert.deepEqual([tool.state, tool.args, tool.requestedArgs, tool.result], ["ok", { version: "1.4.2-hotfix1" }, { version: "1.4.2" }, { deployed: "1.4.2-hotfix1" }]);
  const approval = m.byKey.get("approval:a1");
  assert.deepEqual([approval.decision, approval.by, approval.edited, approval.ranWith], ["approved", "default/alice", true, { version: "1.4.2-hotfix1" }]);
  m.apply({ type: "tool_started", seq: 3, tool_call_id: "t2", tool: "deploy", arguments: {} }, true);
  m.apply({ type: "tool_completed", seq: 4, tool_call_id: "t2", tool: "deploy", outcome: "denied", duration_ms: null, waited_ms: 3000, arguments: {}, result: { error: "no" },
    decision: { approval_id: "a2", decision: "denied", by: "default/bob", at: null, reason: "no", edited: false } }, true);
  assert.equal(m.byKey.get("tool:t2").state, "denied");
  m.apply({ type: "tool_started", seq: 5, tool_call_id: "t3", tool: "ask_user", arguments: { question: "Region?" } }, true);
  m.apply({ type: "tool_completed", seq: 6, tool_call_id: "t3", tool: "ask_user", outcome: "ok", duration_ms: 1, arguments: { question: "Region?" }, result: { answer: "eu" },
    question: { question_id: "q1", text: "Region?", options: ["eu", "us"], answer: "eu", answered_by: "default/alice", answered_at: null } }, true);
  const q = m.byKey.get("question:q1");
  assert.deepEqual([q.kind, q.question.text, q.answer, q.decision, q.by], ["question", "Region?", "eu", "approved", "default/alice"]);
  // Live, the question's end is question_resolved, never an approval with edited arguments.
  const live = new RunModel("r2");
  live.apply({ type: "tool_started", seq: 1, tool_call_id: "t", tool: "ask_user" }, true);
  live.apply({ type: "question", question: { id: "q2", tool_call_id: "t", text: "Go?", options: [] } }, false);
  assert.equal(live.byKey.get("tool:t").state, "asking");
  live.apply({ type: "question_resolved", question_id: "q2", outcome: "answered", answer: "yes", by: "default/alice", reason: null }, false);
  assert.deepEqual([live.byKey.get("question:q2").answer, live.byKey.get("tool:t").state], ["yes", "running"]);
});

test("the follower resumes after its last durable seq: no repeats, no holes, tokens never count", async () => {
  api.setToken("t0k");
  const calls = [];
  const script = [
    // 1st: two events, a token, then the connection breaks.
    () => new Response(body([durable(1, { type: "run_started" }), durable(2, { type: "step", index: 1, kind: "status", status: "RUNNING" }),
      control({ type: "token", seq: 2, text: "x", delta: 1 })], { error: true }), { headers: { "content-type": "text/event-stream" } }),
    // 2nd: the daemon is down.
    () => { throw new TypeError("fetch failed"); },
    // 3rd: an overlap (2 again), 3, then the server's reconnect.
    () => new Response(body([durable(2, { type: "step" }), durable(3, { type: "message_snapshot", message_id: "m", text: "hi" }),
      "retry: 10\n" + control({ type: "reconnect", after_seq: 3, retry_ms: 10 })]), { headers: { "content-type": "text/event-stream" } }),
    // 4th: a gap report.
    () => new Response(body([control({ type: "stream_gap", after_seq: 3, reason: "unreadable" })]), { headers: { "content-type": "text/event-stream" } }),
    // 5th: the rest.
    () => new Response(body([durable(4, { type: "usage", usage: {} }), durable(5, { type: "completed", status: "finished", output: "hi" })]),
      { headers: { "content-type": "text/event-stream" } }),
  ];
  globalThis.fetch = async (url, init) => {
    calls.push({ url: String(url), auth: init.headers.Authorization });
    const next = script.shift();
    if (!next) throw new Error("too many requests");
    return next();
  };
  const seen = [];
  const states = [];
  await new Promise((resolve, reject) => {
    new Follower({
      runId: "r1",
      onEvent: (ev, d) => seen.push([ev.type, d ? ev.seq : null]),
      onStatus: (s) => { states.push(s.state); if (s.state === "failed") reject(new Error(s.message)); },
      onEnd: resolve,
    }).start();
  });
  assert.deepEqual(calls.map((c) => new URL(c.url, "http://x").search), ["?after=0", "?after=2", "?after=2", "?after=3", "?after=3"]);
  assert.ok(calls.every((c) => c.auth === "Bearer t0k"));
  assert.deepEqual(seen.filter(([, s]) => s !== null).map(([, s]) => s), [1, 2, 3, 4, 5]);
  assert.ok(seen.some(([t]) => t === "token"));
  assert.ok(states.includes("waiting"), states.join(","));
  assert.equal(states.at(-1), "ended");
});

test("204 ends the follow, 410 ends it as expired, 401 fails without retrying", async () => {
  for (const [status, want] of [[204, "nothing_more"], [410, "replay_expired"]]) {
    globalThis.fetch = async () => new Response(status === 204 ? null : JSON.stringify({ code: "replay_expired", detail: "gone" }), { status });
    const info = await new Promise((resolve) => new Follower({ runId: "r1", after: 9, onEvent() {}, onEnd: resolve }).start());
    assert.equal(info.reason, want);
  }
  let n = 0;
  globalThis.fetch = async () => { n++; return new Response(JSON.stringify({ code: "unauthenticated", detail: "wrong token" }), { status: 401 }); };
  let hooked = null;
  api.onUnauthorized((e) => { hooked = e; });
  const failed = await new Promise((resolve) => new Follower({ runId: "r1", onEvent() {}, onStatus: (s) => s.state === "failed" && resolve(s) }).start());
  assert.equal(failed.message, "wrong token");
  assert.equal(n, 1);
  assert.equal(hooked.status, 401);
});

test("a pending approval of a run that ends is shown cancelled, with why, and no buttons", () => {
  const m = new RunModel("r1");
  m.apply({ type: "run_started", seq: 1, agent: {}, session_id: "s1" }, true);
  m.apply({ type: "approval_required", approval: { id: "appr_1", tool: "deploy", args: { env: "prod" } } }, false);
  m.apply({ type: "approval_required", approval: { id: "appr_2", tool: "deploy", args: {} } }, false);
  m.apply({ type: "approval_resolved", approval_id: "appr_2", decision: "approved", by: "default/alice", edited: true }, false);
  m.apply({ type: "completed", seq: 2, status: "cancelled" }, true);
  const a1 = m.items.find((i) => i.key === "approval:appr_1");
  assert.equal(a1.decision, "cancelled");
  assert.match(a1.reason, /run ended/);
  const a2 = m.items.find((i) => i.key === "approval:appr_2");
  assert.equal(a2.decision, "approved", "a decided approval keeps its decision");
  assert.equal(a2.edited, true);
});

test("an approval decision: edited arguments only when they changed, a reason only with a denial", async () => {
  const { decisionBody, timeLeft } = await import("../../src/ui/assets/approvals.js");
  const args = { env: "prod", n: 1 };
  assert.deepEqual(decisionBody("approve", args, JSON.stringify(args, null, 2), "x"), { decision: "approve" });
  assert.deepEqual(decisionBody("approve", args, '{"env": "staging", "n": 1}', ""), { decision: "approve", args: { env: "staging", n: 1 } });
  assert.throws(() => decisionBody("approve", args, "{env: staging}", ""), /not valid JSON/);
  assert.deepEqual(decisionBody("deny", args, "garbage", "  freeze  "), { decision: "deny", reason: "freeze" });
  assert.deepEqual(decisionBody("deny", args, "garbage", ""), { decision: "deny" });
  assert.match(timeLeft(new Date(Date.now() + 125000).toISOString()), /^2 min \d+ s left$/);
  assert.equal(timeLeft(new Date(Date.now() - 1000).toISOString()), "time is up");
});

test("a held tool row waits for approval, then runs or ends unrun", () => {
  const m = new RunModel("r1");
  m.apply({ type: "tool_started", seq: 1, tool_call_id: "t1", tool: "deploy" }, true);
  m.apply({ type: "approval_required", approval: { id: "appr_1", tool: "deploy", tool_call_id: "t1", args: {} } }, false);
  assert.equal(m.byKey.get("tool:t1").state, "waiting");
  m.apply({ type: "approval_resolved", approval_id: "appr_1", decision: "approved", by: "me" }, false);
  assert.equal(m.byKey.get("tool:t1").state, "running");
  m.apply({ type: "tool_started", seq: 2, tool_call_id: "t2", tool: "deploy" }, true);
  m.apply({ type: "approval_required", approval: { id: "appr_2", tool: "deploy", tool_call_id: "t2", args: {} } }, false);
  m.apply({ type: "approval_resolved", approval_id: "appr_2", decision: "cancelled", by: "callbackd", reason: "its run ended" }, false);
  // The API's outcome word, not a red "error" (issue 35).
  assert.equal(m.byKey.get("tool:t2").state, "cancelled");
});

test("a question is its own card: an answer resolves it, a run that ends cancels it", () => {
  const m = new RunModel("r1");
  m.apply({ type: "question", question: { id: "appr_q", text: "Which region?", options: ["eu", "us"] } }, false);
  m.apply({ type: "question", question: { id: "appr_q", text: "Which region?", options: ["eu", "us"] } }, false);
  const qs = m.items.filter((i) => i.kind === "question");
  assert.equal(qs.length, 1, "a question re-sent on reconnect is one card");
  m.apply({ type: "approval_resolved", approval_id: "appr_q", decision: "approved", by: "default/alice" }, false);
  assert.equal(qs[0].decision, "approved");
  assert.equal(m.items.filter((i) => i.kind === "approval").length, 0, "an answered question is not an approval card");
  m.apply({ type: "question", question: { id: "appr_q2", text: "Sure?", options: [] } }, false);
  m.apply({ type: "completed", status: "finished" }, true);
  const q2 = m.items.find((i) => i.key === "question:appr_q2");
  assert.equal(q2.decision, "cancelled", "an open question of an ended run has no controls");
});

test("the ask_user call's row waits for an answer, not 'running…', and runs once answered", () => {
  const m = new RunModel("r1");
  const at = "2026-12-01T10:00:00.000Z";
  m.apply({ type: "tool_started", seq: 1, at, tool_call_id: "t1", tool: "ask_user", arguments: { question: "Which region?" } }, true);
  m.apply({ type: "question", question: { id: "appr_q", tool_call_id: "t1", text: "Which region?", options: ["eu", "us"] } }, false);
  assert.equal(m.byKey.get("tool:t1").state, "asking");
  m.apply({ type: "approval_resolved", approval_id: "appr_q", decision: "approved", by: "default/alice" }, false);
  assert.equal(m.byKey.get("tool:t1").state, "running");
  m.apply({ type: "tool_started", seq: 2, at, tool_call_id: "t2", tool: "ask_user", arguments: { question: "Sure?" } }, true);
  m.apply({ type: "question", question: { id: "appr_q2", tool_call_id: "t2", text: "Sure?", options: [] } }, false);
  m.apply({ type: "approval_resolved", approval_id: "appr_q2", decision: "expired" }, false);
  assert.deepEqual([m.byKey.get("tool:t2").state, m.byKey.get("tool:t2").reason], ["error", "expired: not answered"]);
});

test("each row keeps the stream events that made it, for the raw JSON on demand", () => {
  const m = new RunModel("r1");
  const at = "2026-12-01T10:00:00.000Z";
  const started = { type: "tool_started", seq: 1, at, tool_call_id: "t1", tool: "echo", arguments: { x: 1 } };
  const done = { type: "tool_completed", seq: 2, at, tool_call_id: "t1", tool: "echo", outcome: "ok", duration_ms: 3, result: { y: 2 } };
  m.apply(started, true);
  m.apply(started, true);
  m.apply(done, true);
  assert.deepEqual(m.byKey.get("tool:t1").raw, [started, done], "each event once, in order");
  m.apply({ type: "run_started", seq: 3, at, run_id: "r1", session_id: "s1", agent: { id: "s1" } }, true);
  assert.equal(m.byKey.get("seq:3").raw[0].type, "run_started");
});

test("the prompt, a call's arguments and result, and a plan that stands for its call's start", () => {
  const m = new RunModel("r1");
  const at = "2026-12-01T10:00:00.000Z";
  m.apply({ type: "run_started", seq: 1, at, run_id: "r1", session_id: "s1", agent: { id: "s1" }, input: { text: "refund order 42" } }, true);
  m.apply({ type: "tool_started", seq: 2, at, tool_call_id: "t1", tool: "echo", arguments: { x: 1 } }, true);
  m.apply({ type: "tool_completed", seq: 3, at, tool_call_id: "t1", tool: "echo", outcome: "ok", duration_ms: 4, waited_ms: 900, result: { y: 2 } }, true);
  const items = [{ title: "read", status: "completed" }, { title: "refund", status: "in_progress" }];
  m.apply({ type: "plan", seq: 4, at, tool_call_id: "t2", items }, true);
  m.apply({ type: "tool_completed", seq: 5, at, tool_call_id: "t2", tool: "update_plan", outcome: "ok", duration_ms: 1, result: { updated: true } }, true);
  assert.deepEqual(m.items[0].input, { text: "refund order 42" });
  const echo = m.byKey.get("tool:t1");
  assert.deepEqual([echo.args, echo.result, echo.state, echo.waitedMs], [{ x: 1 }, { y: 2 }, "ok", 900]);
  assert.deepEqual(m.items.map((i) => i.kind), ["start", "tool", "plan", "tool"]);
  assert.deepEqual(m.byKey.get("plan:t2").items, items);
  const plan = m.byKey.get("tool:t2");
  assert.deepEqual([plan.tool, plan.args, plan.state, plan.result], ["update_plan", { items }, "ok", { updated: true }]);
});

test("the run's start and end, a held call's waiting time, and durations in words", async () => {
  const { span } = await import(new URL("run.js", ASSETS));
  const m = new RunModel("r1");
  m.apply({ type: "run_started", seq: 1, at: "2026-12-01T10:00:00Z", input: { text: "hi" } }, true);
  m.apply({ type: "tool_started", seq: 2, at: "2026-12-01T10:00:01Z", tool_call_id: "t1", tool: "deploy" }, true);
  m.apply({ type: "approval_required", at: "2026-12-01T10:00:02Z", approval: { id: "a1", tool: "deploy", tool_call_id: "t1", args: {}, created_at: "2026-12-01T10:00:02.500Z" } }, false);
  const tool = m.byKey.get("tool:t1");
  assert.equal(tool.state, "waiting");
  assert.equal(tool.waitingSince, "2026-12-01T10:00:02.500Z", "waits since the approval was asked");
  assert.equal(m.byKey.get("approval:a1").at, "2026-12-01T10:00:02.500Z", "the approval row has its time");
  m.apply({ type: "completed", seq: 3, at: "2026-12-01T10:01:05Z", status: "finished", output: "ok" }, true);
  assert.equal(m.startedAt, "2026-12-01T10:00:00Z");
  assert.equal(m.endedAt, "2026-12-01T10:01:05Z");
  assert.equal(span(Date.parse(m.endedAt) - Date.parse(m.startedAt)), "1 min 5 s");
  assert.equal(span(8200), "8.20 s");
  assert.equal(span(3 * 3600 * 1000 + 120000), "3 h 2 min");

  // A page opened on a finished run: the times come from GET /v1/runs/{id}.
  const later = new RunModel("r2");
  later.applySummary({ session_id: "s", status: "finished", started_at: "2026-12-01T09:00:00Z", ended_at: "2026-12-01T09:00:03Z" });
  assert.equal(later.startedAt, "2026-12-01T09:00:00Z");
  assert.equal(later.endedAt, "2026-12-01T09:00:03Z");
});

test("date filters are ISO days whatever the locale; anything else is refused", async () => {
  const { day } = await import(new URL("find.js", ASSETS));
  assert.equal(day(""), "");
  assert.equal(day(" 2026-12-01 "), "2026-12-01");
  assert.equal(day("12/01/2026"), null);
  assert.equal(day("2026-13-45"), null);
});

test("the token stays in the tab unless the person asks to remember it on this device", () => {
  api.forgetToken();
  api.setToken("tab-only");
  assert.equal(api.token(), "tab-only");
  assert.equal(localStorage.getItem("callbackd.api_token"), null, "not kept for other tabs");
  assert.equal(api.remembered(), false);
  api.setToken("for-every-tab", true);
  assert.equal(localStorage.getItem("callbackd.api_token"), "for-every-tab");
  // A new tab: its own storage is empty, the remembered token is found.
  sessionStorage.removeItem("callbackd.api_token");
  assert.equal(api.token(), "for-every-tab");
  // Choosing "this tab only" later forgets it for the others; Change token forgets both.
  api.setToken("again-tab-only", false);
  assert.equal(api.remembered(), false);
  api.setToken("x", true);
  api.forgetToken();
  assert.equal(api.token(), "");
});

test("a call whose hold was announced before its start waits, it does not run", () => {
  const m = new RunModel("r1");
  m.apply({ type: "approval_required", at: "2026-12-01T10:00:02Z", approval: { id: "a1", tool: "guarded", tool_call_id: "t1", args: {}, created_at: "2026-12-01T10:00:02Z" } }, false);
  m.apply({ type: "tool_started", seq: 4, at: "2026-12-01T10:00:03Z", tool_call_id: "t1", tool: "guarded" }, true);
  assert.equal(m.byKey.get("tool:t1").state, "waiting");
  assert.equal(m.byKey.get("tool:t1").waitingSince, "2026-12-01T10:00:02Z");
  m.apply({ type: "approval_resolved", approval_id: "a1", decision: "approved", by: "me", at: "2026-12-01T10:00:09Z" }, false);
  assert.equal(m.byKey.get("tool:t1").state, "running");
  // Decided before the start arrives: the call runs.
  const n = new RunModel("r2");
  n.apply({ type: "approval_required", approval: { id: "a2", tool_call_id: "t2", args: {} } }, false);
  n.apply({ type: "approval_resolved", approval_id: "a2", decision: "approved", by: "me" }, false);
  n.apply({ type: "tool_started", seq: 5, tool_call_id: "t2", tool: "guarded" }, true);
  assert.equal(n.byKey.get("tool:t2").state, "running");
});

test("the usage chart's scale: a round top, compact labels", async () => {
  const { niceMax, compact } = await import(new URL("usage.js", ASSETS));
  assert.equal(niceMax(47), 50);
  assert.equal(niceMax(1234), 2000);
  assert.equal(niceMax(0), 1);
  assert.equal(compact(2500), "2.5k");
  assert.equal(compact(1500000), "1.5M");
  assert.equal(compact(25), "25");
});

test("the webhooks line counts the recent deliveries and names the last failure", async () => {
  const { webhooksSummary } = await import(new URL("webhooks.js", ASSETS));
  assert.equal(webhooksSummary([]), null);
  const line = webhooksSummary([
    { type: "run.ended", state: "pending", url: "http://h/hook", attempts: 2, last_error: "the receiver answered 500",
      next_attempt_at: "2026-12-06T07:05:00.000Z" },
    { type: "approval.required", state: "delivered", url: "http://h/hook", attempts: 1, last_error: null },
    { type: "approval.resolved", state: "failed", url: "http://h/hook", attempts: 8, last_error: "timeout" },
  ]);
  assert.equal(line, "Webhooks (last 3): 1 delivered, 1 pending, 1 failed; last failure: run.ended to http://h/hook: " +
    "the receiver answered 500 (2 attempts, next 2026-12-06T07:05:00.000Z)");
});
