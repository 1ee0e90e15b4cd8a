// The public types of @callbackd/client. The API's shapes come from openapi.d.ts, generated
// from callbackd's /v1/openapi.json (`npm run gen -- <daemon URL>`); nothing here restates them.
import type { components, paths } from "./openapi.js";

export type { components, paths };

/** Every schema of the API by name: `Schema<"StreamEvent">`, `Schema<"RunState">`, … */
export type Schema<K extends keyof components["schemas"]> = components["schemas"][K];

/** One event of a run's stream: a union discriminated by `type`. */
export type StreamEvent = Schema<"StreamEvent">;

/** The stream event of one `type`: `EventOf<"completed">`. */
export type EventOf<T extends StreamEvent["type"]> = Extract<StreamEvent, { type: T }>;

/** The problem document of an error answer (`application/problem+json`). */
export type Problem = Schema<"Problem">;

type Op<P extends keyof paths, M extends keyof paths[P]> = paths[P][M];
/** The JSON body of an operation's success answer (the first 2xx it declares). */
type Ok<O> = O extends { responses: infer R }
  ? R extends { 200: infer A } ? Body<A>
    : R extends { 201: infer A } ? Body<A>
    : R extends { 202: infer A } ? Body<A>
    : never
  : never;
type Body<A> = A extends { content: { "application/json": infer T } } ? T : void;
/** The JSON request body of an operation. */
type In<O> = O extends { requestBody?: { content: { "application/json": infer T } } } ? T : never;
/** The query parameters of an operation. */
type Query<O> = O extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

export interface ClientOptions {
  /** The daemon's URL, e.g. `http://127.0.0.1:7420` (with or without `/v1`). */
  baseUrl: string;
  /** The API token (`api_token` of the tokens file), or the read-only one. */
  token?: string;
  /** A fetch implementation; default the global one. */
  fetch?: typeof fetch;
  /** A stream silent this long (no event, no keepalive) is dropped and resumed; default 60000. */
  idleTimeoutMs?: number;
}

export interface RequestOptions {
  signal?: AbortSignal;
}

export interface FollowOptions {
  /** Yield the durable events after this seq (default 0: all of them). */
  after?: number;
  /** Stops the stream: the iteration throws the signal's reason. */
  signal?: AbortSignal;
}

/** An answer of the API that is not a success. */
export class CallbackdError extends Error {
  /** The HTTP status (0 when the client gave up without an answer). */
  readonly status: number;
  /** The problem document's `code`, e.g. `not_found`. */
  readonly code: Problem["code"] | null;
  readonly detail: string;
  readonly problem: Problem | null;
}

/** `410 replay_expired`: retention removed the events the stream would need; read the run's
 * state with `getRun` instead. */
export class ReplayExpiredError extends CallbackdError {}

export class Client {
  constructor(options: ClientOptions);
  readonly baseUrl: string;

  /** `POST /v1/sessions`: a new session (an agent on the bridge). */
  createSession(
    options?: In<Op<"/v1/sessions", "post">>,
    request?: RequestOptions,
  ): Promise<Ok<Op<"/v1/sessions", "post">>>;
  /** `GET /v1/sessions/{session_id}`. */
  getSession(sessionId: string, request?: RequestOptions): Promise<Ok<Op<"/v1/sessions/{session_id}", "get">>>;
  /** `GET /v1/sessions`: newest first, paged. */
  listSessions(
    params?: Query<Op<"/v1/sessions", "get">> & { cursor?: string },
    request?: RequestOptions,
  ): Promise<Ok<Op<"/v1/sessions", "get">>>;
  /** `GET /v1/sessions/{session_id}/runs`: the session's runs, in turn order. */
  listRuns(
    sessionId: string,
    params?: Query<Op<"/v1/sessions/{session_id}/runs", "get">> & { cursor?: string },
    request?: RequestOptions,
  ): Promise<Ok<Op<"/v1/sessions/{session_id}/runs", "get">>>;
  /** `GET /v1/runs/{run_id}`: the run's state. */
  getRun(runId: string, request?: RequestOptions): Promise<Ok<Op<"/v1/runs/{run_id}", "get">>>;
  /** `POST /v1/runs/{run_id}/cancel`. */
  cancelRun(runId: string, request?: RequestOptions): Promise<Ok<Op<"/v1/runs/{run_id}/cancel", "post">>>;
  /** `GET /v1/approvals` (`{ state: "pending" }` is the default). */
  listApprovals(
    params?: Query<Op<"/v1/approvals", "get">>,
    request?: RequestOptions,
  ): Promise<Ok<Op<"/v1/approvals", "get">>>;
  /** `POST /v1/approvals/{approval_id}`: `{ decision: "approve" | "deny", reason? }`. */
  decideApproval(
    approvalId: string,
    decision: In<Op<"/v1/approvals/{approval_id}", "post">>,
    request?: RequestOptions,
  ): Promise<Ok<Op<"/v1/approvals/{approval_id}", "post">>>;
  /**
   * `POST /v1/sessions/{session_id}/fork`: a new session whose conversation is the source's
   * after (`at: "after"`) or before (`"before"`) one of its finished runs. A retry is a fork
   * `before` the run, then `sendMessage` on the fork with the run's `input.text` (or another).
   */
  forkSession(
    sessionId: string,
    fork: In<Op<"/v1/sessions/{session_id}/fork", "post">>,
    request?: RequestOptions,
  ): Promise<Ok<Op<"/v1/sessions/{session_id}/fork", "post">>>;
  /** `GET /v1/sessions/{session_id}/forks`: the sessions forked from this one, oldest first. */
  listSessionForks(
    sessionId: string,
    request?: RequestOptions,
  ): Promise<Ok<Op<"/v1/sessions/{session_id}/forks", "get">>>;
  /** `GET /v1/runs/{run_id}/forks`: the sessions forked after or before this run (retries too). */
  listRunForks(runId: string, request?: RequestOptions): Promise<Ok<Op<"/v1/runs/{run_id}/forks", "get">>>;

  /**
   * `POST /v1/sessions/{session_id}/messages`: starts a turn and yields its run's events, from
   * `run_started` to the terminal `completed` or `error`. The message is sent once; after a
   * dropped connection the run is followed from the last durable seq.
   */
  sendMessage(sessionId: string, text: string, options?: RequestOptions): AsyncIterable<StreamEvent>;
  /**
   * `GET /v1/runs/{run_id}/stream`: yields the run's events after `after` until the terminal
   * one (or nothing, when the run has ended and nothing follows `after`). Resumes by itself
   * after any drop, `reconnect` or `stream_gap`, from the last durable seq it yielded, so each
   * durable seq is yielded exactly once. Throws `ReplayExpiredError` on `410`.
   */
  followRun(runId: string, options?: FollowOptions): AsyncIterable<StreamEvent>;
}
