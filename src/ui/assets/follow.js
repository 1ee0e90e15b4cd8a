// Follows one run's stream and survives anything short of the run ending: dropped
// connections, a daemon restart, the server's periodic `reconnect`, a `stream_gap`.
//
// The one position it keeps is the seq of the last *durable* event it handed on (an event
// with an `id:` line). Tokens and control events never move it. Every (re)connect asks for
// `after=<that seq>` and any durable event at or below it is dropped, so each durable event
// reaches the view exactly once however often the connection breaks.

import { send, problem, enc, get, NetworkError } from "./api.js";
import { readSse } from "./sse.js";

const TERMINAL = new Set(["completed", "error"]);
const BACKOFF_MS = [250, 500, 1000, 2000, 3000, 5000];
// Three missed keepalives (15 s each by default) mean the connection is dead, even if the
// socket never said so.
const IDLE_MS = 50000;

/**
 * new Follower({runId?, send?: {sessionId, text}, onEvent(ev, durable), onStatus(s), onEnd(info)})
 * `send` makes the first request the `POST /v1/sessions/{id}/messages` of a new turn; the run
 * id is then learnt from `run_started`. Status: {state: "connecting"|"replaying"|"live"|
 * "waiting"|"ended"|"failed", message?, retryInMs?, attempt?, lastSeq}
 */
export class Follower {
  constructor(opts) {
    this.runId = opts.runId || null;
    this.pendingSend = opts.send || null;
    this.onEvent = opts.onEvent;
    this.onStatus = opts.onStatus || (() => {});
    this.onEnd = opts.onEnd || (() => {});
    this.onRunId = opts.onRunId || (() => {});
    this.lastSeq = opts.after || 0;
    this.stopped = false;
    this.ended = false;
    this.abort = null;
    this.wake = null;
    this.sentAt = null;
  }

  start() {
    this.loop().catch((e) => this.fail(`the console failed: ${e?.message || e}`));
    return this;
  }

  stop() {
    this.stopped = true;
    this.abort?.abort();
    this.wake?.();
  }

  /** Skips the wait before the next reconnect. */
  retryNow() {
    this.wake?.();
  }

  status(state, extra = {}) {
    this.onStatus({ state, lastSeq: this.lastSeq, runId: this.runId, ...extra });
  }

  fail(message, err) {
    this.ended = true;
    this.status("failed", { message, error: err });
  }

  async loop() {
    let attempt = 0;
    let delay = 0;
    while (!this.stopped && !this.ended) {
      if (delay > 0) {
        await this.sleep(delay, attempt);
        if (this.stopped) return;
      }
      let outcome;
      try {
        outcome = await this.connectOnce();
      } catch (e) {
        if (this.stopped) return;
        if (e instanceof NetworkError || e?.name === "TypeError" || e?.name === "AbortError") {
          outcome = { retry: true, why: e instanceof NetworkError ? e.message : "the stream broke" };
        } else {
          throw e;
        }
      }
      if (this.stopped || this.ended) return;
      if (outcome.retry) {
        if (outcome.progress) attempt = 0;
        delay = outcome.retryMs ?? BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)];
        attempt++;
        this.why = outcome.why;
      }
    }
  }

  async sleep(ms, attempt) {
    const until = Date.now() + ms;
    this.status("waiting", { message: this.why, retryInMs: ms, attempt });
    await new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
    this.wake = null;
    return until;
  }

  /** One request and its stream. Returns {retry, why, retryMs?, progress?} or ends the follow. */
  async connectOnce() {
    this.abort = new AbortController();
    const signal = this.abort.signal;
    let resp;
    if (this.pendingSend && !this.runId) {
      if (this.sentAt === null) {
        // The turn itself: sent once, never again, whatever happens to its stream.
        this.status("connecting", { message: "sending the message" });
        this.sentAt = new Date();
        const { sessionId, text } = this.pendingSend;
        resp = await send("POST", `/v1/sessions/${enc(sessionId)}/messages`, {
          body: { text },
          signal,
          accept: "text/event-stream",
        });
        if (!resp.ok) {
          const err = await problem(resp);
          this.fail(`the message was not sent: ${err.detail}`, err);
          return { retry: false };
        }
      } else {
        // The stream of our POST broke before it said which run it started: find the run.
        const found = await this.findSentRun();
        if (!found) {
          if (Date.now() - this.sentAt.getTime() > 60000) {
            this.fail("the connection broke while the message was sent, and no run of it appeared: it was probably not sent");
            return { retry: false };
          }
          return { retry: true, why: "waiting for the run of the message to appear" };
        }
        this.setRunId(found);
        return { retry: true, retryMs: 0, progress: true };
      }
    } else {
      this.status("connecting", { message: this.lastSeq ? `resuming after event #${this.lastSeq}` : "connecting" });
      resp = await send("GET", `/v1/runs/${enc(this.runId)}/stream?after=${this.lastSeq}`, {
        signal,
        accept: "text/event-stream",
      });
      if (resp.status === 204) {
        // A terminal run with nothing after our position.
        this.ended = true;
        this.status("ended");
        this.onEnd({ reason: "nothing_more" });
        return { retry: false };
      }
      if (resp.status === 410) {
        const err = await problem(resp);
        this.ended = true;
        this.status("ended", { message: err.detail });
        this.onEnd({ reason: "replay_expired", error: err });
        return { retry: false };
      }
      if (!resp.ok) {
        const err = await problem(resp);
        if (resp.status >= 500 || resp.status === 429) {
          return { retry: true, why: `callbackd answered ${resp.status}: ${err.detail}` };
        }
        this.fail(err.detail, err);
        return { retry: false };
      }
    }
    return this.read(resp);
  }

  async read(resp) {
    const before = this.lastSeq;
    let idle = null;
    const touch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => this.abort?.abort(), IDLE_MS);
    };
    touch();
    this.status(this.lastSeq ? "replaying" : "connecting", { message: "connected" });
    let reconnectAfter = null;
    try {
      for await (const item of readSse(resp.body)) {
        touch();
        if (this.stopped) return { retry: false };
        if (item.type !== "event") continue;
        let ev;
        try {
          ev = JSON.parse(item.data);
        } catch {
          continue; // not ours to interpret; the numbering is carried by id lines
        }
        const durable = item.id !== null;
        if (durable) {
          const seq = Number(item.id);
          if (!(seq > this.lastSeq)) continue; // already shown: a replay overlap
          this.lastSeq = seq;
        }
        if (ev.type === "run_started" && !this.runId && ev.run_id) this.setRunId(ev.run_id);
        if (ev.type === "up_to_date") this.status("live", { message: "live" });
        if (ev.type === "reconnect") {
          reconnectAfter = Number(ev.retry_ms ?? item.retry ?? 0);
        }
        if (ev.type === "stream_gap") {
          this.onEvent(ev, false);
          return { retry: true, why: `the server could not read an event after #${ev.after_seq} (${ev.reason || "gap"})`, progress: this.lastSeq > before };
        }
        this.onEvent(ev, durable);
        if (durable && TERMINAL.has(ev.type)) {
          this.ended = true;
          this.status("ended");
          this.onEnd({ reason: "terminal", event: ev });
          this.abort?.abort();
          return { retry: false };
        }
      }
    } finally {
      clearTimeout(idle);
    }
    if (reconnectAfter !== null) return { retry: true, retryMs: reconnectAfter, progress: true, why: "the server closed the stream and asked for a reconnect" };
    return { retry: true, why: "the stream ended before the run did", progress: this.lastSeq > before };
  }

  setRunId(id) {
    this.runId = id;
    this.onRunId(id);
  }

  /** The run our lost POST started: the session's active run, else its newest run created
   * after we sent (the POST may have been cut before the bridge even started it). */
  async findSentRun() {
    const sid = this.pendingSend.sessionId;
    const session = await get(`/v1/sessions/${enc(sid)}`);
    if (session?.active_run_id) return session.active_run_id;
    let cursor = null;
    let last = null;
    for (let pages = 0; pages < 100; pages++) {
      const page = await get(`/v1/sessions/${enc(sid)}/runs?limit=100${cursor ? `&cursor=${enc(cursor)}` : ""}`);
      if (page.runs?.length) last = page.runs[page.runs.length - 1];
      cursor = page.next_cursor;
      if (!cursor) break;
    }
    if (last && new Date(last.created_at).getTime() >= this.sentAt.getTime() - 5000) return last.run_id;
    return null;
  }
}
