// Fork and retry from the console (issue 22). On a run page, once the run has ended: "Fork from
// here" (a new session whose conversation is the one this run left), "Fork before this run" (as
// the run found it) and "Retry" (this run's input sent again from before it, in a new session),
// plus the sessions already made from the run. On a session page: where a fork came from, and
// the sessions forked from this one. The buttons are there for the write token only; the lists
// for both. Everything here is a client of /v1 (forkSession, retryRun, listRunForks,
// listSessionForks), like the rest of the console.

import * as api from "./api.js";
import { readSse } from "./sse.js";
import { h, fill, short, stamp } from "./dom.js";

/** A list of forks (`ForkList`), each a link to its session. */
function forkItems(list, describe) {
  return (list.forks || []).map((f) => h("li", { dataset: { session: f.session_id } },
    h("a", { href: `#/sessions/${api.enc(f.session_id)}`, title: f.session_id }, f.name || h("code", {}, short(f.session_id))),
    ` ${describe(f)} · model ${f.model || "default"} · made `, stamp(f.created_at)));
}

/** A fork of a run in words: where its conversation starts, and whether it is a retry. */
function runForkWords(f) {
  if (f.retry) return "a retry: this run's message asked again from where this run started";
  return f.forked_from.at === "after"
    ? "a fork that continues from where this run ended"
    : "a fork that starts from where this run started";
}

/** The run page's fork and retry panel. `update(model)` whenever the run's model changed. */
export class ForkPanel {
  constructor({ canWrite }) {
    this.canWrite = canWrite;
    this.runId = null;
    this.note = h("span.muted.small", { role: "status" });
    this.buttons = h("div.fork-buttons", { hidden: true });
    this.forks = h("ul.forks");
    this.listTitle = h("h3", {}, "Forks of this run");
    this.list = h("div.run-forks", { hidden: true }, this.listTitle, this.forks);
    this.el = h("section.fork-panel", { "aria-label": "Fork and retry" }, this.buttons, this.note, this.list);
  }

  update(model) {
    if (!model.terminal || !model.runId || this.runId === model.runId) return;
    this.runId = model.runId;
    this.sessionId = model.sessionId;
    if (this.canWrite()) {
      const button = (id, label, title, action) => {
        const b = h("button", { type: "button", id, title }, label);
        b.addEventListener("click", () => this.act(b, action));
        return b;
      };
      fill(this.buttons,
        button("fork-after", "Fork from here", "A new session whose conversation is the one this run left", () => this.fork("after")),
        button("fork-before", "Fork before this run", "A new session whose conversation is the one this run found", () => this.fork("before")),
        button("retry", "Retry", "Send this run's message again from before it, in a new session", () => this.retry()));
      this.buttons.hidden = false;
    }
    this.loadForks();
  }

  async act(button, action) {
    for (const b of this.buttons.querySelectorAll("button")) b.disabled = true;
    try {
      await action();
    } catch (e) {
      this.note.textContent = `${button.textContent} failed: ${e.detail || e.message}`;
      for (const b of this.buttons.querySelectorAll("button")) b.disabled = false;
    }
  }

  async fork(at) {
    this.note.textContent = "forking…";
    const forked = await api.post(`/v1/sessions/${api.enc(this.sessionId)}/fork`, { run_id: this.runId, at });
    location.hash = `#/sessions/${api.enc(forked.session.session_id)}`;
  }

  /** POST …/retry answers the new run's stream; it is read until `run_started` names the run,
   * whose own page then follows it (leaving a stream does not cancel its run). */
  async retry() {
    this.note.textContent = "retrying…";
    const abort = new AbortController();
    const resp = await api.send("POST", `/v1/runs/${api.enc(this.runId)}/retry`,
      { body: {}, signal: abort.signal, accept: "text/event-stream" });
    if (!resp.ok) throw await api.problem(resp);
    const session = resp.headers.get("callbackd-session-id");
    let runId = null;
    try {
      for await (const item of readSse(resp.body)) {
        if (item.type !== "event") continue;
        const ev = JSON.parse(item.data);
        if (ev.type === "run_started") {
          runId = ev.run_id;
          break;
        }
      }
    } finally {
      abort.abort();
    }
    location.hash = runId ? `#/runs/${api.enc(runId)}` : `#/sessions/${api.enc(session)}`;
  }

  async loadForks() {
    try {
      const list = await api.get(`/v1/runs/${api.enc(this.runId)}/forks`);
      const n = (list.forks || []).length;
      fill(this.forks, forkItems(list, runForkWords));
      fill(this.listTitle, n === 1 ? "1 session made from this run" : `${n} sessions made from this run`);
      this.list.hidden = !n;
    } catch {
      // the run page itself shows what is wrong with the run
    }
  }
}

/** The session page's part: where it was forked from (`session.forked_from`) and its forks. */
export function sessionForks(session) {
  const from = session.forked_from
    ? h("p.forked-from", {}, "Forked from session ",
      h("a", { href: `#/sessions/${api.enc(session.forked_from.session_id)}` }, h("code", {}, short(session.forked_from.session_id))),
      ": its conversation ", session.forked_from.at === "after" ? "continues from where run " : "starts from where run ",
      h("a", { href: `#/runs/${api.enc(session.forked_from.run_id)}` }, h("code", {}, short(session.forked_from.run_id))),
      session.forked_from.at === "after" ? " ended." : " started (a retry, if its first message is that run's again).")
    : null;
  const forks = h("ul.forks");
  const list = h("div.session-forks", { hidden: true }, h("h2", {}, "Forks"), forks);
  api.get(`/v1/sessions/${api.enc(session.session_id)}/forks`).then((l) => {
    fill(forks, forkItems(l, (f) => `${f.retry ? "a retry of" : f.forked_from.at === "after" ? "continues after" : "starts before"} run ${short(f.forked_from.run_id)}`));
    list.hidden = !(l.forks || []).length;
  }).catch(() => {});
  return h("div", {}, from, list);
}
