// The run API (/v1) over fetch, with the bearer token the console was given. The token lives
// in sessionStorage: it survives a reload and the daemon's restarts, and is gone when the tab
// is closed. When the person ticks "Remember on this device" it is kept in localStorage too,
// for every tab of this origin until "Change token" (docs/console.md says what that risks).

const KEY = "callbackd.api_token";

/** A non-2xx answer, with the API's problem details (spec §4) when it sent them. */
export class ApiError extends Error {
  constructor(status, problem) {
    const detail = problem?.detail || problem?.title || `HTTP ${status}`;
    super(detail);
    this.status = status;
    this.code = problem?.code || null;
    this.title = problem?.title || null;
    this.detail = detail;
  }
}

/** The daemon could not be reached at all (refused, reset, restarted). */
export class NetworkError extends Error {}

let unauthorizedHook = () => {};
/** Called with the ApiError of every 401, so the app can ask for a token again. */
export function onUnauthorized(fn) {
  unauthorizedHook = fn;
}

export function token() {
  try {
    return sessionStorage.getItem(KEY) || localStorage.getItem(KEY) || "";
  } catch {
    return "";
  }
}

/** Keeps `t` for this tab; with `remember`, for every tab of this origin as well. Without it,
 * a token remembered before is forgotten (the person chose this tab only). */
export function setToken(t, remember = false) {
  sessionStorage.setItem(KEY, t.trim());
  try {
    if (remember) localStorage.setItem(KEY, t.trim());
    else localStorage.removeItem(KEY);
  } catch {
    // storage refused (private mode): this tab keeps it
  }
}

/** Whether the token is remembered on this device. */
export function remembered() {
  try {
    return !!localStorage.getItem(KEY);
  } catch {
    return false;
  }
}

export function forgetToken() {
  sessionStorage.removeItem(KEY);
  try {
    localStorage.removeItem(KEY);
  } catch {
    // nothing was kept there
  }
}

/** `#token=...` (as `callbackd run` prints it): store it, then take it out of the address bar
 * and the history so it is not left on screen or in a bookmark. */
export function takeTokenFromFragment() {
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (!m) return false;
  setToken(decodeURIComponent(m[1]), remembered());
  const rest = location.hash.replace(/(^#|&)token=[^&]*/, "$1").replace(/^#&/, "#");
  history.replaceState(null, "", location.pathname + location.search + (rest === "#" ? "" : rest));
  return true;
}

/** A raw request: resolves with the Response whatever its status, rejects with NetworkError. */
export async function send(method, path, { body, signal, accept } = {}) {
  const headers = { Authorization: `Bearer ${token()}` };
  if (accept) headers.Accept = accept;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  try {
    return await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: "no-store",
    });
  } catch (e) {
    if (e?.name === "AbortError") throw e;
    throw new NetworkError(`cannot reach callbackd (${e?.message || e})`);
  }
}

/** The ApiError of a failed response. */
export async function problem(resp) {
  let p = null;
  try {
    const text = await resp.text();
    p = JSON.parse(text);
  } catch {
    p = null;
  }
  const err = new ApiError(resp.status, p);
  if (resp.status === 401) unauthorizedHook(err);
  return err;
}

/** A JSON request that must succeed. */
export async function json(method, path, body) {
  const resp = await send(method, path, { body, accept: "application/json" });
  if (!resp.ok) throw await problem(resp);
  if (resp.status === 204) return null;
  return resp.json();
}

export const get = (path) => json("GET", path);
export const post = (path, body) => json("POST", path, body ?? {});
export const enc = encodeURIComponent;
