// @callbackd/client: a typed client of callbackd's run API (`/v1`). No dependency beyond
// fetch; runs in Node >= 18 and browsers. The types are in index.d.ts (over openapi.d.ts,
// generated from the daemon's /v1/openapi.json).
//
// The streams (sendMessage, followRun) keep one position: the seq of the last durable event
// (an event with an `id:` line) they yielded. Tokens and control events never move it. Every
// (re)connect asks for `after=<that seq>` and drops any durable event at or below it, so each
// durable event is yielded exactly once however often the connection breaks.
import { readSse } from "./sse.js";

const TERMINAL = new Set(["completed", "error"]);
/** The reconnect delay when the server has not sent a `retry:` field. */
const DEFAULT_RETRY_MS = 1000;
/** The longest wait between attempts that make no progress. */
const MAX_BACKOFF_MS = 30000;
/** Silence (not even a keepalive, sent every 15 s) that means a dead connection. */
const IDLE_MS = 60000;
/** A message whose POST broke before it named its run: how long to look for the run. */
const FIND_RUN_MS = 60000;

/** An answer of the API that is not a success: the problem document's fields. */
export class CallbackdError extends Error {
  constructor(status, problem, fallback) {
    const p = problem && typeof problem === "object" ? problem : {};
    super(p.detail || fallback || `callbackd answered ${status}`);
    this.name = "CallbackdError";
    this.status = status;
    this.code = p.code || null;
    this.detail = p.detail || this.message;
    this.problem = problem && typeof problem === "object" ? problem : null;
  }
}

/** `410 replay_expired`: retention removed the events the stream would need. */
export class ReplayExpiredError extends CallbackdError {
  constructor(status, problem) {
    super(status, problem, "the run's events were removed by retention");
    this.name = "ReplayExpiredError";
  }
}

async function problemOf(resp) {
  const text = await resp.text().catch(() => "");
  try {
    return JSON.parse(text);
  } catch {
    return { detail: text ? `callbackd answered ${resp.status}: ${text.slice(0, 500)}` : undefined };
  }
}

async function errorOf(resp) {
  const p = await problemOf(resp);
  return resp.status === 410 ? new ReplayExpiredError(resp.status, p) : new CallbackdError(resp.status, p);
}

function abortError(signal) {
  if (signal.reason !== undefined) return signal.reason;
  const e = new Error("the operation was aborted");
  e.name = "AbortError";
  return e;
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal));
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(abortError(signal));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** An AbortController that also aborts when `outer` does (AbortSignal.any is Node >= 20.3). */
function linked(outer) {
  const c = new AbortController();
  if (!outer) return { controller: c, unlink() {} };
  const onAbort = () => c.abort(outer.reason);
  if (outer.aborted) onAbort();
  else outer.addEventListener("abort", onAbort, { once: true });
  return { controller: c, unlink: () => outer.removeEventListener("abort", onAbort) };
}

const enc = encodeURIComponent;

function query(params) {
  const parts = [];
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null) parts.push(`${enc(k)}=${enc(String(v))}`);
  }
  return parts.length ? `?${parts.join("&")}` : "";
}

export class Client {
  /**
   * @param {{baseUrl: string, token: string, fetch?: typeof fetch}} opts baseUrl is the
   * daemon's URL (`http://127.0.0.1:7420`, with or without `/v1`).
   */
  constructor({ baseUrl, token, fetch: f, idleTimeoutMs } = {}) {
    if (!baseUrl) throw new TypeError("new Client({ baseUrl, token }): baseUrl is required");
    this.baseUrl = String(baseUrl).replace(/\/+$/, "").replace(/\/v1$/, "");
    this.token = token;
    const impl = f || globalThis.fetch;
    if (typeof impl !== "function") throw new TypeError("no fetch: pass one as new Client({ fetch })");
    // Called unbound, a browser's fetch throws "Illegal invocation".
    this.fetch = f ? f : (...a) => impl.apply(globalThis, a);
    this.idleTimeoutMs = idleTimeoutMs ?? IDLE_MS;
  }

  headers(extra) {
    const h = { ...extra };
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    return h;
  }

  /** One request; the parsed JSON body, or a CallbackdError. */
  async request(method, path, { body, signal } = {}) {
    const resp = await this.fetch(this.baseUrl + path, {
      method,
      headers: this.headers(body !== undefined ? { "Content-Type": "application/json" } : {}),
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal,
    });
    if (!resp.ok) throw await errorOf(resp);
    if (resp.status === 204) return undefined;
    const text = await resp.text();
    return text ? JSON.parse(text) : undefined;
  }

  createSession(opts = {}, { signal } = {}) {
    return this.request("POST", "/v1/sessions", { body: opts, signal });
  }

  getSession(sessionId, { signal } = {}) {
    return this.request("GET", `/v1/sessions/${enc(sessionId)}`, { signal });
  }

  listSessions(params = {}, { signal } = {}) {
    return this.request("GET", `/v1/sessions${query(params)}`, { signal });
  }

  listRuns(sessionId, params = {}, { signal } = {}) {
    return this.request("GET", `/v1/sessions/${enc(sessionId)}/runs${query(params)}`, { signal });
  }

  getRun(runId, { signal } = {}) {
    return this.request("GET", `/v1/runs/${enc(runId)}`, { signal });
  }

  cancelRun(runId, { signal } = {}) {
    return this.request("POST", `/v1/runs/${enc(runId)}/cancel`, { signal });
  }

  listApprovals(params = {}, { signal } = {}) {
    return this.request("GET", `/v1/approvals${query(params)}`, { signal });
  }

  decideApproval(approvalId, decision, { signal } = {}) {
    return this.request("POST", `/v1/approvals/${enc(approvalId)}`, { body: decision, signal });
  }

  forkSession(sessionId, fork, { signal } = {}) {
    return this.request("POST", `/v1/sessions/${enc(sessionId)}/fork`, { body: fork, signal });
  }

  listSessionForks(sessionId, { signal } = {}) {
    return this.request("GET", `/v1/sessions/${enc(sessionId)}/forks`, { signal });
  }

  listRunForks(runId, { signal } = {}) {
    return this.request("GET", `/v1/runs/${enc(runId)}/forks`, { signal });
  }

  /**
   * Starts a turn and yields its run's events until the terminal one. The message is sent
   * once; when its stream breaks, the run is followed with `GET /v1/runs/{id}/stream`.
   */
  sendMessage(sessionId, text, { signal } = {}) {
    return this.follow({ send: { sessionId, text }, after: 0, signal });
  }

  /** Yields the run's events after `after` (all when absent) until the terminal one. */
  followRun(runId, { after, signal } = {}) {
    return this.follow({ runId, after: after ?? 0, signal });
  }

  async *follow({ runId = null, send = null, after = 0, signal }) {
    let last = after;
    let retryMs = DEFAULT_RETRY_MS; // the server's `retry:` field replaces it
    let failures = 0; // attempts in a row that yielded nothing durable
    let delay = 0;
    let sentAt = null;
    for (;;) {
      if (delay > 0) await sleep(delay, signal);
      if (signal?.aborted) throw abortError(signal);
      const { controller, unlink } = linked(signal);
      let resp = null;
      try {
        if (send && runId === null) {
          if (sentAt === null) {
            // The turn itself: sent once, never again, whatever happens to its stream.
            sentAt = Date.now();
            resp = await this.fetch(`${this.baseUrl}/v1/sessions/${enc(send.sessionId)}/messages`, {
              method: "POST",
              headers: this.headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
              body: JSON.stringify({ text: send.text }),
              signal: controller.signal,
            });
          } else {
            // Its stream broke before `run_started` named the run: find the run it started.
            runId = await this.findSentRun(send.sessionId, sentAt, controller.signal);
            if (runId === null) {
              if (Date.now() - sentAt > FIND_RUN_MS) {
                throw new CallbackdError(0, null, "the connection broke while the message was sent, and no run of it appeared");
              }
              delay = Math.min(retryMs, MAX_BACKOFF_MS);
            } else {
              delay = 0;
            }
            continue;
          }
        } else {
          resp = await this.fetch(`${this.baseUrl}/v1/runs/${enc(runId)}/stream?after=${last}`, {
            headers: this.headers({ Accept: "text/event-stream" }),
            signal: controller.signal,
          });
        }
        if (resp.status === 204) return; // a terminal run with nothing after `last`
        if (!resp.ok) {
          const err = await errorOf(resp);
          // The daemon restarting or overloaded: try again; anything else is the caller's.
          if ((resp.status >= 500 && resp.status !== 501) || resp.status === 429) {
            if (sentAt !== null && runId === null) throw err; // a refused POST: the turn did not start
            failures++;
            delay = backoff(retryMs, failures);
            continue;
          }
          throw err;
        }
        let progressed = false;
        let reconnectMs = null;
        let gap = false;
        // A connection that stays silent is dead even if no socket said so: drop it.
        let idle = null;
        const touch = () => {
          clearTimeout(idle);
          idle = setTimeout(() => controller.abort(), this.idleTimeoutMs);
        };
        touch();
        try {
          for await (const item of readSse(resp.body)) {
            touch();
            if (item.retry !== null && item.retry !== undefined) retryMs = item.retry;
            if (item.kind !== "event") continue;
            let ev;
            try {
              ev = JSON.parse(item.data);
            } catch {
              continue; // not JSON: nothing of the run API; the numbering is carried by ids
            }
            const durable = item.id !== null;
            if (durable) {
              const seq = Number(item.id);
              if (!(seq > last)) continue; // already yielded: a replay overlap
              last = seq;
              progressed = true;
            }
            if (ev.type === "run_started" && runId === null && ev.run_id) runId = ev.run_id;
            if (ev.type === "reconnect") reconnectMs = Number(ev.retry_ms ?? retryMs);
            yield ev;
            if (ev.type === "stream_gap") {
              gap = true;
              break;
            }
            if (durable && TERMINAL.has(ev.type)) return;
          }
        } catch (e) {
          if (signal?.aborted) throw abortError(signal);
          if (!isNetworkError(e)) throw e;
        } finally {
          clearTimeout(idle);
        }
        failures = progressed || reconnectMs !== null ? 0 : failures + 1;
        if (reconnectMs !== null) delay = reconnectMs;
        else if (gap) delay = progressed ? 0 : backoff(retryMs, failures);
        else delay = failures === 0 ? retryMs : backoff(retryMs, failures);
        if (send && runId === null && sentAt !== null) delay = 0; // go and find the run at once
      } catch (e) {
        if (signal?.aborted) throw abortError(signal);
        if (!isNetworkError(e) || e instanceof CallbackdError) throw e;
        if (send && runId === null) {
          // The POST never reached the server: the turn did not start.
          if (resp === null && sentAt !== null && isRefused(e)) throw e;
          if (Date.now() - sentAt > FIND_RUN_MS) throw e;
        }
        failures++;
        delay = backoff(retryMs, failures);
      } finally {
        controller.abort(); // the connection of this attempt, if still open
        unlink();
      }
    }
  }

  /** The run our lost POST started: the session's active run, else its newest run created
   * after we sent (the POST may have been cut before the bridge even started it). */
  async findSentRun(sessionId, sentAt, signal) {
    const session = await this.getSession(sessionId, { signal });
    if (session?.active_run_id) return session.active_run_id;
    let cursor;
    let lastRun = null;
    for (let pages = 0; pages < 100; pages++) {
      const page = await this.listRuns(sessionId, { limit: 1000, cursor }, { signal });
      if (page?.runs?.length) lastRun = page.runs[page.runs.length - 1];
      cursor = page?.next_cursor;
      if (!cursor) break;
    }
    if (lastRun?.created_at && new Date(lastRun.created_at).getTime() >= sentAt - 5000) return lastRun.run_id;
    return null;
  }
}

function isRefused(e) {
  return e?.cause?.code === "ECONNREFUSED" || e?.code === "ECONNREFUSED";
}

function backoff(retryMs, failures) {
  return Math.min(retryMs * 2 ** Math.max(0, failures - 1), MAX_BACKOFF_MS);
}

/** A broken connection (fetch's TypeError, an undici socket error, a reset), not a bug. */
function isNetworkError(e) {
  if (!e || e instanceof CallbackdError) return false;
  return e.name === "TypeError" || e.name === "AbortError" || /terminated|ECONNRESET|socket|network|fetch failed/i.test(String(e.message));
}
