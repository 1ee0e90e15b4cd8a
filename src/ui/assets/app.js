// The console: a token, three pages (sessions, a session, a run), all of it a client of /v1.

import * as api from "./api.js";
import { h, fill, short, stamp, preview } from "./dom.js";
import { Follower } from "./follow.js";
import { RunModel, RunView } from "./run.js";
import { approvalsPage, watchCount } from "./approvals.js";
import { ForkPanel, sessionForks } from "./fork.js";
import { sessionSearch, sessionActions } from "./sessions.js";
import { runsPage } from "./find.js";
import { usagePage } from "./usage.js";

const main = document.getElementById("main");
const dialog = document.getElementById("token-dialog");
const form = document.getElementById("token-form");
const input = document.getElementById("token-input");
const remember = document.getElementById("token-remember");
const tokenError = document.getElementById("token-error");
const roleEl = document.getElementById("role");
const forget = document.getElementById("forget");

let me = null; // {namespace, role}
let teardown = () => {};
let countTimer = null;
let asking = null;
let identifying = false;
let tokenGiven = null; // closes the open token prompt (a token arrived another way)

const canWrite = () => me?.role === "write";

// ---- the token ------------------------------------------------------------------------------

/** Shows the token dialog (once, however many requests failed) and resolves when a token was
 * entered. */
function askToken(message) {
  if (message) {
    tokenError.textContent = message;
    tokenError.hidden = false;
  } else {
    tokenError.hidden = true;
  }
  if (asking) return asking;
  input.value = "";
  remember.checked = api.remembered();
  asking = new Promise((resolve) => {
    tokenGiven = () => {
      form.removeEventListener("submit", submitted);
      if (dialog.open) dialog.close();
      asking = null;
      tokenGiven = null;
      resolve();
    };
    const submitted = (e) => {
      e.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      api.setToken(t, remember.checked);
      tokenGiven();
    };
    form.addEventListener("submit", submitted);
  });
  if (!dialog.open) dialog.showModal();
  input.focus();
  return asking;
}

// Escape must not leave the console without a token.
dialog.addEventListener("cancel", (e) => {
  if (!api.token()) e.preventDefault();
});

/** Who the token is: asks until a token works; waits while callbackd cannot be reached. */
async function identify(firstMessage) {
  identifying = true;
  try {
    await identifyLoop(firstMessage);
  } finally {
    identifying = false;
  }
}

async function identifyLoop(firstMessage) {
  let message = firstMessage;
  for (;;) {
    if (!api.token()) {
      await askToken(message);
      message = null;
      continue;
    }
    try {
      me = await api.get("/v1/whoami");
      roleEl.hidden = false;
      roleEl.textContent = me.role === "write" ? `${me.namespace}` : `${me.namespace} · read-only`;
      roleEl.className = `role role-${me.role}`;
      forget.hidden = false;
      document.body.dataset.role = me.role;
      if (!countTimer) countTimer = watchCount(document.getElementById("approvals-count"), api);
      return;
    } catch (e) {
      if (e.status === 401) {
        api.forgetToken();
        message = `That token was not accepted: ${e.detail}`;
        continue;
      }
      fill(main, h("p.failure", { role: "alert" }, `${e.message}. Trying again…`));
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
}

// Any call answered 401 (the token was revoked or changed): ask again, then redraw the page.
api.onUnauthorized(async (err) => {
  if (asking || identifying) return;
  api.forgetToken();
  me = null;
  await identify(`The token was not accepted: ${err.detail}`);
  route();
});

forget.addEventListener("click", async () => {
  api.forgetToken();
  await identify("Enter another API token.");
  route();
});

// ---- routing --------------------------------------------------------------------------------

function route() {
  teardown();
  teardown = () => {};
  const path = location.hash.replace(/^#/, "") || "/sessions";
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  main.replaceChildren();
  if (parts[0] === "sessions" && parts[1]) sessionPage(parts[1]);
  else if (parts[0] === "runs" && parts[1]) runPage({ runId: parts[1] });
  else if (parts[0] === "approvals") approvalsPage(main, api, canWrite, (f) => { teardown = f; });
  else if (parts[0] === "runs") runsPage(main, api, (f) => { teardown = f; });
  else if (parts[0] === "usage") usagePage(main, api, (f) => { teardown = f; });
  else sessionsPage();
}

function problemBox(e) {
  return h("p.failure", { role: "alert" }, e.detail || e.message || String(e));
}

function badge(status) {
  return h(`span.badge.status-${status || "unknown"}`, {}, status || "?");
}

function cwdText(cwd) {
  return Array.isArray(cwd) ? cwd.join(", ") : cwd || "";
}

// ---- sessions -------------------------------------------------------------------------------

function sessionsPage() {
  document.title = "Sessions · callbackd";
  const body = h("tbody");
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const status = h("p.muted", { role: "status" }, "Loading…");
  const head = h("div.page-head", {}, h("h1", {}, "Sessions"));
  let filter = ""; // q= and status= (sessions.js)
  const search = sessionSearch((p) => { filter = p; cursor = null; body.replaceChildren(); status.textContent = "Loading…"; load(); });
  fill(main, head, canWrite() ? newSessionForm() : null, search,
    h("div.table-wrap", {}, h("table.sessions", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Session"), h("th", {}, "Status"), h("th.c-model", {}, "Model"),
        h("th.c-cwd", {}, "Workspace"), h("th", {}, "Last activity"))),
      body)),
    status, more);
  let cursor = null;
  let alive = true;
  teardown = () => { alive = false; };
  async function load() {
    more.disabled = true;
    try {
      const page = await api.get(`/v1/sessions?limit=25${filter ? `&${filter}` : ""}${cursor ? `&cursor=${api.enc(cursor)}` : ""}`);
      if (!alive) return;
      for (const s of page.sessions || []) {
        body.append(h("tr", { dataset: { sessionId: s.session_id } },
          h("td.c-name", {}, h("a", { href: `#/sessions/${api.enc(s.session_id)}`, title: s.name || s.session_id }, s.name || short(s.session_id)),
            h("div.muted.small", {}, s.name ? h("code", { title: s.session_id }, short(s.session_id)) : null,
              s.forked_from ? [s.name ? " · " : "", s.forked_from.at === "before" ? "fork before run " : "fork after run ", h("code", {}, short(s.forked_from.run_id))] : null)),
          h("td", {}, badge(s.status), s.active_run_id ? [" ", h("a.small", { href: `#/runs/${api.enc(s.active_run_id)}` }, "live run")] : null),
          h("td.c-model", {}, s.model || "default"),
          h("td.c-cwd", {}, h("span.path", {}, cwdText(s.cwd))),
          h("td.c-when", {}, stamp(s.updated_at))));
      }
      cursor = page.next_cursor || null;
      more.hidden = !cursor;
      status.textContent = body.children.length ? "" : filter ? "No sessions match." : "No sessions yet.";
    } catch (e) {
      if (alive) fill(status, problemBox(e));
    } finally {
      more.disabled = false;
    }
  }
  more.addEventListener("click", load);
  load();
}

function newSessionForm() {
  const name = h("input", { id: "new-name", name: "name", placeholder: "e.g. Q3 deploy plan", maxlength: 200, autocomplete: "off" });
  const model = h("input", { id: "new-model", name: "model", placeholder: "default model", autocomplete: "off" });
  const cwd = h("input", { id: "new-cwd", name: "cwd", placeholder: "the bridge's workspace", autocomplete: "off" });
  const err = h("p.failure", { role: "alert", hidden: true });
  const create = h("button.primary", { type: "submit", id: "new-session" }, "New session");
  const f = h("form.new-session", { "aria-label": "New session" },
    h("div.new-name", {}, h("label", { for: "new-name" }, "Name (optional)"), name),
    create,
    h("details.options", {}, h("summary", {}, "Options: model, workspace"),
      h("label", { for: "new-model" }, "Model"), model,
      h("label", { for: "new-cwd" }, "Workspace (an absolute path)"), cwd),
    err);
  f.addEventListener("submit", async (e) => {
    e.preventDefault();
    create.disabled = true;
    err.hidden = true;
    const body = {};
    if (name.value.trim()) body.name = name.value.trim();
    if (model.value.trim()) body.model = model.value.trim();
    if (cwd.value.trim()) body.cwd = cwd.value.trim();
    try {
      const r = await api.post("/v1/sessions", body);
      const id = r?.session?.session_id ?? r?.session_id;
      location.hash = `#/sessions/${api.enc(id)}`;
    } catch (e2) {
      err.textContent = `Could not create a session: ${e2.detail || e2.message}`;
      err.hidden = false;
    } finally {
      create.disabled = false;
    }
  });
  return f;
}

// ---- one session ----------------------------------------------------------------------------

async function sessionPage(id) {
  document.title = `Session ${short(id)} · callbackd`;
  let alive = true;
  teardown = () => { alive = false; };
  const info = h("dl.facts");
  const runs = h("tbody");
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const status = h("p.muted", { role: "status" }, "Loading…");
  const title = h("h1", {}, "Session");
  const runsPart = h("div", {},
    h("h2", {}, "Runs"),
    h("div.table-wrap", {}, h("table.runs", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Turn"), h("th", {}, "Status"), h("th", {}, "Started"), h("th.c-in", {}, "Asked"), h("th.c-out", {}, "Output"))),
      runs)),
    status, more);
  fill(main,
    h("p.crumbs", {}, h("a", { href: "#/sessions" }, "Sessions"), " / ", h("code", {}, short(id))),
    title, info, runsPart);
  try {
    const s = await api.get(`/v1/sessions/${api.enc(id)}`);
    if (!alive) return;
    if (s.name) {
      fill(title, s.name);
      document.title = `${s.name} · callbackd`;
    }
    if (canWrite()) main.append(composer(id, null, (text) => runPage({ send: { sessionId: id, text } })));
    fill(info,
      h("dt", {}, "Id"), h("dd", {}, h("code", {}, s.session_id)),
      s.name ? [h("dt", {}, "Name"), h("dd", {}, s.name)] : null,
      h("dt", {}, "Status"), h("dd", {}, badge(s.status)),
      h("dt", {}, "Model"), h("dd", {}, s.model || "default"),
      h("dt", {}, "Workspace"), h("dd", {}, h("span.path", {}, cwdText(s.cwd))),
      h("dt", {}, "Created"), h("dd", {}, stamp(s.created_at)),
      h("dt", {}, "Last activity"), h("dd", {}, stamp(s.updated_at)));
    info.after(sessionForks(s));
    if (canWrite()) info.after(sessionActions(api, s, { onRenamed: () => route(), onDeleted: () => { location.hash = "#/sessions"; } }));
  } catch (e) {
    // An unknown (or deleted) session: the error, and nothing that waits or sends.
    if (alive) {
      fill(title, e.status === 404 ? "No such session" : "Session");
      fill(info, problemBox(e), h("p", {}, h("a", { href: "#/sessions" }, "All sessions")));
      runsPart.remove();
    }
    return;
  }
  let cursor = null;
  async function load() {
    try {
      const page = await api.get(`/v1/sessions/${api.enc(id)}/runs?limit=50${cursor ? `&cursor=${api.enc(cursor)}` : ""}`);
      if (!alive) return;
      for (const r of page.runs || []) {
        const out = r.error ? r.error.detail || r.error.title : r.output;
        runs.append(h("tr", { dataset: { runId: r.run_id } },
          h("td", {}, h("a", { href: `#/runs/${api.enc(r.run_id)}` }, `#${r.turn_number ?? "?"}`)),
          h("td", {}, badge(r.status)),
          h("td.c-when", {}, stamp(r.started_at || r.created_at)),
          h("td.c-in", { "data-label": "Asked" }, preview(r.input?.text ?? "")),
          h("td.c-out", { "data-label": r.error ? "Error" : "Output" }, preview(out || ""))));
      }
      cursor = page.next_cursor || null;
      more.hidden = !cursor;
      status.textContent = runs.children.length ? "" : "No runs yet.";
    } catch (e) {
      if (alive) fill(status, problemBox(e));
    }
  }
  more.addEventListener("click", load);
  load();
}

/** The message box. `busy()` says whether a run of the session is still going. */
function composer(sessionId, busy, onSend) {
  const text = h("textarea", { id: "message", name: "text", rows: 3, required: true, placeholder: "Message the agent" });
  const sendBtn = h("button.primary", { type: "submit", id: "send" }, "Send");
  const f = h("form.composer", { "aria-label": "Send a message" },
    h("label", { for: "message" }, "Message"), text,
    h("div.actions", {}, h("span.muted.small", {}, "Ctrl+Enter sends"), sendBtn));
  const submit = () => {
    const t = text.value.trim();
    if (!t || (busy && busy())) return;
    text.value = "";
    onSend(t);
  };
  f.addEventListener("submit", (e) => { e.preventDefault(); submit(); });
  text.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); submit(); }
  });
  f.setBusy = (b) => { sendBtn.disabled = b; sendBtn.title = b ? "The run is still going" : ""; };
  return f;
}

// ---- one run --------------------------------------------------------------------------------

/** A run followed live: `{runId}` for an existing run, `{send: {sessionId, text}}` to start a
 * turn and follow its run. */
async function runPage({ runId, send }) {
  teardown();
  let alive = true;
  let follower = null;
  const model = new RunModel(runId || null);
  const view = new RunView(model);
  teardown = () => { alive = false; follower?.stop(); view.dispose(); };
  document.title = "Run · callbackd";
  const crumbs = h("p.crumbs", {}, h("a", { href: "#/sessions" }, "Sessions"));
  const cancel = h("button.danger", { type: "button", id: "cancel", hidden: true }, "Cancel run");
  const cancelNote = h("span.muted.small", { role: "status" });
  const slot = h("div");
  const forks = new ForkPanel({ canWrite });
  fill(main, crumbs, view.el, h("div.run-actions", {}, cancel, cancelNote), forks.el, slot);
  if (send) {
    model.sessionId = send.sessionId;
    model.status = "queued";
    view.list.before(h("p.you", {}, h("span.who", {}, "you"), " ", send.text));
  }
  view.render();
  if (runId) {
    try {
      const run = await api.get(`/v1/runs/${api.enc(runId)}`);
      if (!alive) return;
      model.sessionId = run.session_id;
      model.model = run.model ?? null;
      model.startedAt = run.started_at ?? run.created_at ?? null;
      model.endedAt = run.ended_at ?? null;
      if (!model.status) model.status = run.status;
      view.render();
    } catch (e) {
      // An unknown run: the error, and no empty timeline that looks like it still loads.
      if (alive) {
        view.dispose();
        fill(main, crumbs, h("h1", {}, e.status === 404 ? "No such run" : "Run"), problemBox(e),
          h("p", {}, h("a", { href: "#/runs" }, "All runs")));
      }
      return;
    }
  }
  const sessionId = model.sessionId;
  fill(crumbs, h("a", { href: "#/sessions" }, "Sessions"), " / ",
    h("a", { href: `#/sessions/${api.enc(sessionId)}` }, h("code", {}, short(sessionId))));
  let box = null;
  if (canWrite()) {
    box = composer(sessionId, () => !model.terminal, (text) => runPage({ send: { sessionId, text } }));
    fill(slot, box);
  }
  const controls = () => {
    const active = !model.terminal && !!model.runId;
    cancel.hidden = !(canWrite() && active);
    box?.setBusy(!model.terminal);
    forks.update(model);
  };
  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    cancelNote.textContent = "cancelling…";
    try {
      await api.post(`/v1/runs/${api.enc(model.runId)}/cancel`);
      cancelNote.textContent = "cancel requested";
    } catch (e) {
      cancelNote.textContent = `cancel failed: ${e.detail || e.message}`;
    } finally {
      cancel.disabled = false;
    }
  });
  follower = new Follower({
    runId,
    send,
    onEvent: (ev, durable) => {
      model.apply(ev, durable);
      view.update();
      controls();
    },
    onStatus: (s) => {
      view.connection(s);
      // A message that was not sent goes back into the box, to retry or edit.
      if (s.state === "failed" && send && !model.runId && box) {
        const text = box.querySelector("textarea");
        if (!text.value) text.value = send.text;
      }
    },
    onRunId: (id) => {
      model.runId = id;
      if (alive) history.replaceState(null, "", `#/runs/${api.enc(id)}`);
      view.update();
      controls();
    },
    onEnd: async (info) => {
      if (info.reason === "replay_expired") {
        model.expired = `This run's events were removed by retention (${info.error.detail}); what callbackd keeps of it:`;
      }
      if (info.reason === "nothing_more" && !model.terminal) {
        view.connection({ state: "ended", message: "run ended" });
      }
      try {
        if (model.runId) model.applySummary(await api.get(`/v1/runs/${api.enc(model.runId)}`));
      } catch {
        // the stream already showed what there is
      }
      if (!alive) return;
      view.update();
      controls();
    },
  });
  view.onRetryNow = () => follower.retryNow();
  if (canWrite()) {
    // A held tool call: the person watching decides (the stream then says approval_resolved).
    view.onDecide = async (id, decision) => {
      try {
        // An answer to a question resumes the run; anything else decides an approval.
        await api.post(decision.question_id ? `/v1/runs/${api.enc(model.runId)}/resume` : `/v1/approvals/${api.enc(id)}`, decision);
      } catch (e) {
        cancelNote.textContent = `the ${decision.decision} was not taken: ${e.detail || e.message}`;
        throw e;
      }
    };
  }
  follower.start();
  controls();
}

// ---- start ----------------------------------------------------------------------------------

window.addEventListener("hashchange", async () => {
  // The console URL pasted into this tab again: its #token= replaces the one we had.
  if (api.takeTokenFromFragment()) {
    if (tokenGiven) {
      tokenGiven(); // the waiting identify() tries the new token and routes
      return;
    }
    await identify();
  }
  if (!asking) route();
});

api.takeTokenFromFragment();
await identify();
route();
