// One run as the console shows it: a model fed with the stream's typed events (run-api.md §2),
// and a view that renders it. Rows are keyed (a tool call by its id, a message by its id, a
// step by its seq), so an event applied twice updates its row instead of adding one.

import { decisionForm, timeLeft } from "./approvals.js";
import { questionForm, questionOutcome } from "./questions.js";
import { h, fill, ms, short, stamp } from "./dom.js";

// One outcome vocabulary with the API (run-api.md "Tool calls"), plus the states of a call
// that has not ended.
const TOOL_LABEL = { waiting: "waiting for approval", asking: "waiting for an answer", running: "running…", ok: "ok", error: "error", denied: "denied", expired: "expired (nobody decided)", cancelled: "cancelled", timeout: "timed out", unknown: "outcome unknown" };
const ENDED = ["ok", "error", "denied", "expired", "cancelled", "timeout"];

export class RunModel {
  constructor(runId) {
    this.runId = runId;
    this.sessionId = null;
    this.model = null;
    this.status = null;
    this.items = [];
    this.byKey = new Map();
    this.pending = null; // {text, count}: tokens of the message being written
    this.usage = null;
    this.output = null;
    this.error = null;
    this.terminal = false;
    this.expired = null;
    this.lastSeq = 0;
    this.startedAt = null; // the run's start and end (ISO), for the header's times and duration
    this.endedAt = null;
  }

  upsert(key, fields) {
    let item = this.byKey.get(key);
    if (!item) {
      item = { key, ...fields };
      this.byKey.set(key, item);
      this.items.push(item);
    } else {
      Object.assign(item, fields);
    }
    // The stream events that made the row, for "JSON" on demand (each once).
    if (this.current) {
      item.raw = item.raw || [];
      if (!item.raw.includes(this.current)) item.raw.push(this.current);
    }
    item.rev = (item.rev || 0) + 1;
    return item;
  }

  /** Applies one stream event. `durable`: it had an id line (the follower drops repeats). */
  apply(ev, durable) {
    this.current = ev;
    try {
      this.applyEvent(ev, durable);
    } finally {
      this.current = null;
    }
  }

  applyEvent(ev, durable) {
    if (durable && typeof ev.seq === "number") this.lastSeq = Math.max(this.lastSeq, ev.seq);
    if (ev.run_id && !this.runId) this.runId = ev.run_id;
    switch (ev.type) {
      case "run_started":
        this.sessionId = ev.session_id ?? this.sessionId;
        this.model = ev.agent?.model ?? this.model;
        if (!this.terminal) this.status = "running";
        this.startedAt = this.startedAt ?? ev.at ?? null;
        this.upsert(`seq:${ev.seq}`, { kind: "start", at: ev.at, seq: ev.seq, model: this.model, input: ev.input });
        break;
      case "step":
        this.upsert(`seq:${ev.seq}`, { kind: "step", seq: ev.seq, at: ev.at, index: ev.index, stepKind: ev.kind, status: ev.status, text: ev.text });
        break;
      case "token": {
        // `delta` counts the fragments of the open message from 1; a repeat is ignored.
        const d = ev.delta ?? (this.pending ? this.pending.count + 1 : 1);
        if (!this.pending || d === 1) this.pending = { text: "", count: 0 };
        if (d > this.pending.count) {
          this.pending.text += ev.text ?? "";
          this.pending.count = d;
        }
        break;
      }
      case "message_snapshot":
        this.upsert(`msg:${ev.message_id}`, { kind: "message", seq: ev.seq, at: ev.at, text: ev.text ?? "", delta: ev.delta });
        this.pending = null;
        break;
      case "tool_started": {
        // The hold is often announced before the call's start: a call already held waits.
        const held = this.heldCall(ev.tool_call_id);
        this.upsert(`tool:${ev.tool_call_id}`, { kind: "tool", id: ev.tool_call_id, tool: ev.tool, state: held?.state ?? "running", waitingSince: held?.since, at: ev.at, seq: ev.seq, args: ev.arguments, argsCut: ev.truncated });
        break;
      }
      case "tool_completed": {
        // What ran (the approved arguments), what the model asked when a person changed it,
        // the tool's own result, and the decision or the answer: the same account as the API.
        this.upsert(`tool:${ev.tool_call_id}`, {
          kind: "tool", id: ev.tool_call_id, tool: ev.tool, state: ENDED.includes(ev.outcome) ? ev.outcome : "error",
          durationMs: ev.duration_ms, waitedMs: ev.waited_ms, result: ev.result, resultCut: ev.truncated,
          ...(ev.arguments !== undefined ? { args: ev.arguments, argsCut: ev.truncated } : {}),
          requestedArgs: ev.requested_arguments, decision: ev.decision, question: ev.question,
          reason: ev.outcome === "cancelled" && !ev.decision ? "the run ended before this call did" : undefined,
          endedAt: ev.at, endSeq: ev.seq, ...(this.byKey.has(`tool:${ev.tool_call_id}`) ? {} : { at: ev.at }),
        });
        // The replay has no approval_required/question events: the decision and the
        // question come from here, so a replay shows them as the live view did.
        const d = ev.decision;
        if (d && d.approval_id) {
          const have = this.byKey.get(`approval:${d.approval_id}`);
          this.upsert(`approval:${d.approval_id}`, {
            kind: "approval", approval: { ...(have?.approval || {}), id: d.approval_id, tool: ev.tool, tool_call_id: ev.tool_call_id },
            decision: d.decision, by: d.by, reason: d.reason, edited: d.edited, ranWith: ev.arguments, requestedArgs: ev.requested_arguments,
          });
        }
        const q = ev.question;
        if (q && q.question_id) {
          const have = this.byKey.get(`question:${q.question_id}`);
          this.upsert(`question:${q.question_id}`, {
            kind: "question", question: { ...(have?.question || {}), id: q.question_id, text: q.text, options: q.options, tool_call_id: ev.tool_call_id },
            decision: q.answer !== null && q.answer !== undefined ? "approved" : (have?.decision || ev.outcome), answer: q.answer, by: q.answered_by ?? have?.by,
          });
        }
        break;
      }
      case "plan":
        this.upsert(`plan:${ev.tool_call_id}`, { kind: "plan", seq: ev.seq, at: ev.at, items: ev.items || [] });
        // The plan stands for the call's tool_started: its row runs, with the items as arguments.
        if (!this.byKey.has(`tool:${ev.tool_call_id}`)) {
          this.upsert(`tool:${ev.tool_call_id}`, { kind: "tool", id: ev.tool_call_id, tool: "update_plan", state: "running", at: ev.at, seq: ev.seq, args: { items: ev.items || [] } });
        }
        break;
      case "tool_outcome_unknown":
        this.upsert(`tool:${ev.tool_call_id}`, { kind: "tool", id: ev.tool_call_id, tool: ev.tool, state: "unknown", reason: ev.reason, endedAt: ev.at, endSeq: ev.seq });
        break;
      case "task":
        this.upsert(`task:${ev.task_id}`, { kind: "task", seq: ev.seq, at: this.byKey.get(`task:${ev.task_id}`)?.at ?? ev.at, title: ev.title, status: ev.status, progress: ev.progress });
        break;
      case "usage":
        this.usage = ev.usage ?? this.usage;
        break;
      case "completed":
        this.endedAt = ev.at ?? this.endedAt;
        this.terminal = true;
        this.abandonRunning();
        this.status = ev.status || "finished";
        this.usage = ev.usage ?? this.usage;
        this.output = ev.output ?? null;
        this.pending = null;
        break;
      case "error":
        this.endedAt = ev.at ?? this.endedAt;
        this.terminal = true;
        this.abandonRunning();
        this.status = "error";
        this.error = ev.problem || { detail: "the run failed" };
        this.usage = ev.usage ?? this.usage;
        this.pending = null;
        break;
      case "sdk_message":
        this.upsert(`seq:${ev.seq}`, { kind: "raw", seq: ev.seq, at: ev.at, message: ev.message });
        break;
      case "approval_required": {
        this.upsert(`approval:${ev.approval?.id}`, { kind: "approval", approval: ev.approval, decision: null, at: ev.approval?.created_at ?? ev.at });
        // The held call's row waits for a person, it does not run.
        const tool = ev.approval?.tool_call_id && this.byKey.get(`tool:${ev.approval.tool_call_id}`);
        if (tool && tool.state === "running") this.upsert(tool.key, { state: "waiting", waitingSince: ev.approval?.created_at ?? ev.at });
        break;
      }
      case "question": {
        this.upsert(`question:${ev.question?.id}`, { kind: "question", question: ev.question, decision: null, at: ev.question?.created_at ?? ev.question?.asked_at ?? ev.at });
        // The ask_user call waits for a person's answer, it does not run.
        const tool = ev.question?.tool_call_id && this.byKey.get(`tool:${ev.question.tool_call_id}`);
        if (tool && tool.state === "running") this.upsert(tool.key, { state: "asking", waitingSince: ev.question?.created_at ?? ev.at });
        break;
      }
      case "question_resolved": {
        const question = this.byKey.get(`question:${ev.question_id}`);
        const answered = ev.outcome === "answered";
        this.upsert(`question:${ev.question_id}`, { kind: "question", decision: answered ? "approved" : ev.outcome, answer: ev.answer, by: ev.by, reason: ev.reason });
        const asked = question?.question?.tool_call_id && this.byKey.get(`tool:${question.question.tool_call_id}`);
        if (asked && asked.state === "asking") this.upsert(asked.key, { state: answered ? "running" : ev.outcome, reason: answered ? undefined : `${ev.outcome}: not answered` });
        break;
      }
      case "approval_resolved": {
        const question = this.byKey.get(`question:${ev.approval_id}`);
        if (question) {
          this.upsert(question.key, { decision: ev.decision, by: ev.by, reason: ev.reason, decidedAt: ev.at });
          const asked = question.question?.tool_call_id && this.byKey.get(`tool:${question.question.tool_call_id}`);
          if (asked && asked.state === "asking") this.upsert(asked.key, { state: ev.decision === "approved" ? "running" : "error", reason: ev.decision === "approved" ? undefined : `${ev.decision}: not answered` });
          break;
        }
        this.upsert(`approval:${ev.approval_id}`, { kind: "approval", decision: ev.decision, by: ev.by, reason: ev.reason, edited: ev.edited, decidedAt: ev.at });
        const callId = this.byKey.get(`approval:${ev.approval_id}`)?.approval?.tool_call_id;
        const tool = callId && this.byKey.get(`tool:${callId}`);
        if (tool && tool.state === "waiting") this.upsert(tool.key, { state: ev.decision === "approved" ? "running" : ev.decision, reason: ev.decision === "approved" ? undefined : `${ev.decision}: not run` });
        break;
      }
      default:
        break; // control events (up_to_date, reconnect, stream_gap) change the connection, not the run
    }
  }

  /** How call `id` waits for a person, if an undecided approval or question holds it. */
  heldCall(id) {
    for (const i of this.items) {
      if (i.decision) continue;
      if (i.kind === "approval" && i.approval?.tool_call_id === id) return { state: "waiting", since: i.at };
      if (i.kind === "question" && i.question?.tool_call_id === id) return { state: "asking", since: i.at };
    }
    return null;
  }

  /** A call still running when its run ended (a cancel does not stop the host's tool; its
   * answer is dropped) is cancelled: the run will never see its result. The stream says so
   * too (a `tool_completed` before the terminal event); this covers what it cannot. */
  abandonRunning() {
    for (const i of this.items) {
      // A held call of an ended run never runs: no buttons, and why.
      if ((i.kind === "approval" || i.kind === "question") && !i.decision) {
        Object.assign(i, { decision: "cancelled", by: "callbackd", reason: "the run ended while it waited for a decision; it was not run" });
        i.rev = (i.rev || 0) + 1;
      }
      if (i.kind === "tool" && (i.state === "running" || i.state === "waiting" || i.state === "asking")) {
        Object.assign(i, { state: "cancelled", reason: "the run ended before this call did" });
        i.rev = (i.rev || 0) + 1;
      }
    }
  }

  /** What GET /v1/runs/{id} says, for a run whose stream has nothing (more) to tell: its
   * events were removed by retention, or they ended before the terminal one. Adds the tool
   * calls only callbackd's own record has (the ones a cancel abandoned). */
  applySummary(run) {
    this.sessionId = run.session_id ?? this.sessionId;
    this.startedAt = this.startedAt ?? run.started_at ?? run.created_at ?? null;
    this.endedAt = this.endedAt ?? run.ended_at ?? null;
    this.model = run.model ?? this.model;
    // The stream's terminal event wins: the run document can still say "running" for a few
    // tens of milliseconds after it (the bridge stores the event before it settles the run).
    if (!this.terminal) {
      this.status = run.status ?? this.status;
      this.usage = run.usage ?? this.usage;
      if (run.output !== undefined && run.output !== null) this.output = run.output;
      if (run.error) this.error = run.error;
      this.terminal = ["finished", "error", "cancelled", "expired"].includes(run.status);
    }
    for (const c of run.tool_calls || []) {
      const key = `tool:${c.tool_call_id}`;
      const have = this.byKey.get(key);
      if (have && have.state !== "running") continue;
      const state = c.cut_off && c.outcome !== "ok" ? "unknown" : c.outcome === "awaiting" ? "waiting" : c.outcome === "running" ? "running" : ENDED.includes(c.outcome) ? c.outcome : "error";
      this.upsert(key, { kind: "tool", id: c.tool_call_id, tool: c.tool, state, durationMs: c.duration_ms, waitedMs: c.waited_ms, at: have?.at ?? c.started_at,
        args: c.arguments, requestedArgs: c.requested_arguments, result: c.result, decision: c.decision, question: c.question, reason: c.cut_off ? c.outcome : undefined, fromRecord: true });
    }
    if (this.terminal) this.abandonRunning();
  }
}

function words(key) {
  return key.replace(/([a-z])([A-Z])/g, "$1 $2").replace(/_/g, " ").replace(/ tokens?$/i, "").toLowerCase();
}

const USAGE_ORDER = ["inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "totalTokens"];

export function usageLine(usage) {
  if (!usage || typeof usage !== "object") return "";
  const rank = (k) => (USAGE_ORDER.includes(k) ? USAGE_ORDER.indexOf(k) : USAGE_ORDER.length);
  return Object.entries(usage)
    .filter(([, v]) => typeof v === "number")
    .sort(([a], [b]) => rank(a) - rank(b))
    .map(([k, v]) => `${words(k)} ${v.toLocaleString()}`)
    .join(" · ");
}

/** Renders a RunModel; `update()` after each batch of events. */
export class RunView {
  constructor(model) {
    this.model = model;
    this.rows = new Map(); // key -> {li, rev}
    this.title = h("h2", {}, "Run");
    this.badge = h("span.badge");
    this.meta = h("p.meta");
    this.times = h("p.meta.times");
    this.conn = h("div.conn", { role: "status", "aria-live": "polite" });
    this.list = h("ol.transcript", { "aria-label": "Run events" });
    this.writing = h("div.msg.writing", { hidden: true, "aria-live": "off" });
    this.result = h("section.result", { "aria-label": "Result" });
    this.el = h("section.run", {}, h("header.run-head", {}, this.title, this.badge), this.meta, this.times, this.conn, this.list, this.writing, this.result);
    this.scheduled = false;
  }

  /** Batches DOM work to one pass per frame: tokens can arrive hundreds a second. */
  update() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      this.render();
    });
  }

  render() {
    const m = this.model;
    fill(this.title, "Run ", h("code", { title: m.runId || "" }, m.runId ? short(m.runId) : "(starting)"));
    this.badge.className = `badge status-${m.status || "unknown"}`;
    this.badge.textContent = m.status || "…";
    this.el.dataset.status = m.status || "";
    this.el.dataset.runId = m.runId || "";
    fill(this.meta,
      m.sessionId ? h("a", { href: `#/sessions/${encodeURIComponent(m.sessionId)}` }, "session ", h("code", {}, short(m.sessionId))) : null,
      m.model ? ` · model ${m.model}` : null,
      m.lastSeq ? ` · ${m.lastSeq} events` : null);
    fill(this.times, runTimes(m));
    // Each step lasts until the next one starts (the last until the run's end).
    const steps = m.items.filter((i) => i.kind === "step" && i.at);
    steps.forEach((st, k) => {
      const next = steps[k + 1]?.at ?? (m.terminal ? m.endedAt : null);
      const took = next ? Date.parse(next) - Date.parse(st.at) : null;
      if (took !== null && !Number.isNaN(took) && st.took !== took) {
        st.took = took;
        st.rev = (st.rev || 0) + 1;
      }
    });
    for (const item of m.items) {
      let row = this.rows.get(item.key);
      if (!row) {
        row = { li: h("li"), rev: -1 };
        this.rows.set(item.key, row);
        this.list.append(row.li);
      }
      if (row.rev !== item.rev) {
        renderItem(row.li, item, this.onDecide);
        row.rev = item.rev;
      }
    }
    if (m.pending && m.pending.text) {
      this.writing.hidden = false;
      fill(this.writing, h("div.who", {}, "assistant (writing)"), h("div.text", {}, m.pending.text), h("span.caret", { "aria-hidden": "true" }));
    } else {
      this.writing.hidden = true;
    }
    this.renderResult();
    // A running tool's row counts its seconds; the clock stops with the last running tool.
    const ticking = (i) => i.kind === "tool" && ["running", "waiting", "asking"].includes(i.state);
    const running = m.items.some(ticking) || (!m.terminal && m.startedAt);
    if (running && !this.tick) {
      this.tick = setInterval(() => {
        for (const i of this.model.items) if (ticking(i)) i.rev++;
        this.render();
      }, 1000);
    } else if (!running && this.tick) {
      clearInterval(this.tick);
      this.tick = null;
    }
  }

  /** Stops the view's timer (the page is leaving). */
  dispose() {
    clearInterval(this.tick);
    this.tick = null;
  }

  renderResult() {
    const m = this.model;
    const parts = [];
    if (m.expired) parts.push(h("p.notice", {}, m.expired));
    if (m.usage) parts.push(h("p.usage", {}, h("strong", {}, "Usage: "), usageLine(m.usage)));
    if (m.terminal && m.status !== "error") {
      parts.push(h(m.status === "finished" ? "div.final" : "div.final.unfinished", {}, h("h3", {}, m.status === "finished" ? "Final output" : `Run ${m.status}`),
        m.endedAt ? h("p.ended.muted.small", {}, "ended ", stamp(m.endedAt)) : null,
        m.output ? h("div.text.output", {}, m.output) : h("p.muted", {}, "(no output)")));
    }
    if (m.error) {
      parts.push(h("div.failure", { role: "alert" }, h("h3", {}, m.error.title || "The run failed"),
        m.endedAt ? h("p.ended.muted.small", {}, "ended ", stamp(m.endedAt)) : null,
        h("p.detail", {}, m.error.detail || "(no detail)"),
        m.error.code ? h("p.muted", {}, `code ${m.error.code}`) : null));
    }
    fill(this.result, parts);
  }

  /** The connection line: what the follower is doing, in words. */
  connection(s) {
    this.el.dataset.conn = s.state;
    const msg = s.message ? ` (${s.message})` : "";
    let text = "";
    let cls = "conn";
    switch (s.state) {
      case "connecting": text = s.message || "connecting…"; break;
      case "replaying": text = "connected, catching up…"; break;
      case "live": text = "live"; cls += " live"; break;
      case "waiting":
        cls += " waiting";
        text = `Connection lost${msg}. Reconnecting in ${Math.max(1, Math.round(s.retryInMs / 1000))} s, resuming after event #${s.lastSeq}…`;
        break;
      case "ended": text = s.message || "run ended"; cls += " ended"; break;
      case "failed": text = s.message || "failed"; cls += " failed"; break;
      default: text = s.state;
    }
    this.conn.className = cls;
    fill(this.conn, text, s.state === "waiting" && this.onRetryNow ? [" ", h("button.link", { type: "button", onclick: this.onRetryNow }, "Retry now")] : null);
  }
}

function elapsed(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? "" : `${Math.max(0, Math.floor((Date.now() - t) / 1000))} s so far`;
}

/** "1 min 5 s", "8.20 s": a duration a person reads at a glance. */
export function span(msTotal) {
  if (msTotal === null || msTotal === undefined || Number.isNaN(msTotal)) return "";
  if (msTotal < 60000) return ms(Math.max(0, msTotal));
  const s = Math.round(msTotal / 1000);
  const hrs = Math.floor(s / 3600);
  const min = Math.floor((s % 3600) / 60);
  return hrs ? `${hrs} h ${min} min` : `${min} min ${s % 60} s`;
}

/** The run's header line of times: when it started, when it ended and how long it took (or
 * how long it has been going). */
export function runTimes(m) {
  if (!m.startedAt) return null;
  const start = Date.parse(m.startedAt);
  if (m.terminal && m.endedAt) {
    return ["started ", stamp(m.startedAt), " · ended ", stamp(m.endedAt), ` · took ${span(Date.parse(m.endedAt) - start)}`];
  }
  if (m.terminal) return ["started ", stamp(m.startedAt)];
  return ["started ", stamp(m.startedAt), ` · going for ${span(Date.now() - start)}`];
}

/** A call that waits for a person: for whom, since when, how long so far. */
function waitingText(item) {
  const since = item.waitingSince || item.at;
  const who = item.state === "asking" ? "an answer from a person" : "a person's approval";
  const sinceMs = Date.parse(since);
  return h("span", { title: "Anyone with this namespace's write token decides: here, on the Approvals page, or with callbackd approve / deny" },
    `waits for ${who} since `, stamp(since), Number.isNaN(sinceMs) ? "" : ` (${span(Date.now() - sinceMs)} so far)`);
}

/** Values longer than this many characters or lines (pretty-printed) start folded. */
const FOLD_CHARS = 400;
const FOLD_LINES = 10;

/** A tool call's arguments or result, pretty-printed in a <details>: open when short, folded
 * when long; a value the stream cut says where the whole of it is. */
function jsonBlock(label, value, cut, callId, cls = label) {
  if (value === undefined) return null;
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  const lines = text.split("\n").length;
  const fold = cut || text.length > FOLD_CHARS || lines > FOLD_LINES;
  return h(`details.json.${cls}`, { open: !fold },
    h("summary", {}, label, fold ? h("span.muted.small", {}, ` (${lines.toLocaleString()} lines, ${text.length.toLocaleString()} characters)`) : null),
    h("pre", {}, text),
    cut ? h("p.muted.small", {}, `Cut at 64 KiB: the whole value is at GET /v1/runs/…/tool_calls/${callId}.`) : null);
}

/** The stream events behind a row, as the API sent them: closed until asked for. */
function rawBlock(events) {
  return h("details.json.raw", {},
    h("summary", {}, "JSON"),
    h("pre", {}, events.map((e) => JSON.stringify(e, null, 2)).join("\n")));
}

/** A held call's decision, in words: who, how, when, why. */
function decisionLine(d) {
  if (!d || !d.decision) return null;
  return h("div.decision", { dataset: { decision: d.decision } },
    h("span.label", {}, "decision"),
    `${d.decision}${d.by ? ` by ${d.by}` : ""}${d.edited ? " with edited arguments" : ""}`,
    d.at ? [" ", stamp(d.at)] : null,
    d.reason ? h("span.reason", {}, d.reason) : null);
}

function renderItem(li, item, decide) {
  renderRow(li, item, decide);
  if (item.kind !== "raw" && item.raw && item.raw.length) li.append(rawBlock(item.raw));
}

function renderRow(li, item, decide) {
  li.className = `item ${item.kind}`;
  li.dataset.key = item.key;
  if (item.seq !== undefined) li.dataset.seq = item.seq;
  switch (item.kind) {
    case "start":
      fill(li, h("span.label", {}, "started"), h("span", {}, item.model ? `model ${item.model}` : ""), stamp(item.at),
        item.input && typeof item.input.text === "string"
          ? h("div.prompt", {}, h("span.label", {}, "asked"), h("div.text", {}, item.input.text), item.input.truncated ? h("span.muted.small", {}, " (shortened)") : null)
          : null);
      break;
    case "step": {
      const what = item.stepKind === "status" ? `status ${item.status ?? ""}` : item.stepKind === "thinking" ? "thinking" : item.stepKind || "step";
      fill(li, h("span.label", {}, `step ${item.index ?? ""}`), h("span", {}, what), item.text ? h("span.text.thought", {}, item.text) : null,
        item.took !== undefined ? h("span.duration", {}, `took ${span(item.took)}`) : null, stamp(item.at));
      break;
    }
    case "message":
      li.dataset.messageId = item.key.slice(4);
      fill(li, h("div.who", {}, "assistant", stamp(item.at)), h("div.text", {}, item.text));
      break;
    case "tool":
      li.classList.add(`tool-${item.state}`);
      li.dataset.toolCallId = item.id;
      li.dataset.outcome = item.state;
      fill(li,
        h("span.label", {}, "tool"),
        h("span.tool-name", {}, item.tool || "?"),
        h("span.outcome", {}, TOOL_LABEL[item.state] || item.state),
        h("span.duration", {}, item.durationMs !== undefined && item.durationMs !== null ? ms(item.durationMs)
          : item.state === "running" && item.at ? elapsed(item.at)
            : item.state === "waiting" || item.state === "asking" ? waitingText(item) : ""),
        item.waitedMs ? h("span.duration.waited", {}, `waited ${ms(item.waitedMs)} for a person`) : null,
        item.reason ? h("span.reason", {}, item.reason) : null,
        h("code.call-id", { title: item.id }, short(item.id)),
        stamp(item.at),
        decisionLine(item.decision),
        item.question ? h("div.asked", {}, h("span.label", {}, "asked"), h("span.question-text", {}, item.question.text || ""),
          item.question.answer !== null && item.question.answer !== undefined
            ? [h("span.label", {}, "answer"), h("span.answer", {}, item.question.answer), item.question.answered_by ? h("span.muted.small", {}, ` by ${item.question.answered_by}`) : null]
            : h("span.muted.small", {}, " (not answered)")) : null,
        // What ran is the approved arguments; the model's, when a person changed them, beside.
        jsonBlock(item.requestedArgs !== undefined && item.requestedArgs !== null ? "arguments (ran with, edited)" : "arguments", item.args, item.argsCut, item.id, "arguments"),
        item.requestedArgs !== undefined && item.requestedArgs !== null ? jsonBlock("the model asked", item.requestedArgs, false, item.id, "requested") : null,
        jsonBlock("result", item.result, item.resultCut, item.id));
      break;
    case "plan":
      fill(li, h("span.label", {}, "plan"), stamp(item.at),
        h("ul.checklist", {}, (item.items || []).map((i) => h(`li.plan-${i.status}`, { dataset: { status: i.status } },
          h("span.mark", { "aria-hidden": "true" }, i.status === "completed" ? "☑" : i.status === "in_progress" ? "▶" : "☐"),
          " ", i.title, i.status === "in_progress" ? h("span.muted.small", {}, " (in progress)") : null))));
      break;
    case "task":
      fill(li, h("span.label", {}, "task"), h("span", {}, item.title || item.key), h("span.outcome", {}, item.status || ""),
        item.progress !== undefined && item.progress !== null ? h("span", {}, String(item.progress)) : null, stamp(item.at));
      break;
    case "approval": {
      li.dataset.approvalId = item.key.slice("approval:".length);
      li.dataset.decision = item.decision || "pending";
      const pending = !item.decision && decide;
      fill(li,
        h("span.label", {}, "approval"),
        h("span.tool-name", {}, item.approval?.tool || ""),
        // Decided: what the tool ran with (the edit, if any), and what the model asked.
        !pending && (item.ranWith ?? item.approval?.args) ? h("code.raw.ran-with", {}, JSON.stringify(item.ranWith ?? item.approval.args).slice(0, 200)) : null,
        !pending && item.requestedArgs ? h("span.muted.small.requested", {}, ` (the model asked ${JSON.stringify(item.requestedArgs).slice(0, 200)})`) : null,
        h("span.outcome", {}, item.decision ? [`${item.decision}${item.by ? ` by ${item.by}` : ""}${item.edited ? " (with edited arguments)" : ""}`, item.decidedAt ? [" at ", stamp(item.decidedAt)] : null] : "waits for a decision"),
        stamp(item.at),
        item.reason ? h("span.reason", {}, item.reason) : null,
        item.approval?.expires_at && !item.decision ? h("span.time-left", {}, timeLeft(item.approval.expires_at)) : null,
        pending ? h("pre.args", {}, JSON.stringify(item.approval?.args ?? {}, null, 2)) : null,
        pending ? decisionForm(item.approval || {}, (body) => decide(li.dataset.approvalId, body)) : null);
      break;
    }
    case "question": {
      const q = item.question || {};
      li.dataset.questionId = q.id || "";
      li.dataset.decision = item.decision || "pending";
      fill(li,
        h("span.label", {}, "question"),
        h("span.question-text", {}, q.text || ""),
        stamp(item.at),
        item.decision ? h("span.outcome", {}, questionOutcome(item)) : h("span.time-left", {}, timeLeft(q.expires_at)),
        item.reason ? h("span.reason", {}, item.reason) : null,
        !item.decision && decide ? questionForm(q, (answer) => decide(q.id, { question_id: q.id, answer })) : null);
      break;
    }
    default:
      fill(li, h("span.label", {}, item.message?.type || "event"), h("code.raw", {}, JSON.stringify(item.message ?? {}).slice(0, 300)), stamp(item.at));
  }
}
