// Approval cards and the Approvals page (issue 25): what a held tool call asks, pretty-printed,
// an editor to change the arguments before approving, a reason to give with a denial, and
// how long is left. Decisions go to POST /v1/approvals/{id}; a refusal (an edit that fails the
// tool's schema, an approval that ended meanwhile) is shown, never swallowed.
import { h, fill, when } from "./dom.js";
import { questionForm } from "./questions.js";

/** The built-in tool whose held calls are questions to the person, answered, not approved. */
const ASK_USER = "ask_user";

/** "4 min 10 s left" until `iso`, or "time is up". */
export function timeLeft(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return "";
  const s = Math.floor((t - Date.now()) / 1000);
  if (s <= 0) return "time is up";
  return s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s left` : `${s} s left`;
}

/** The body of a decision from the card's fields: edited args only when they changed. */
export function decisionBody(decision, original, editedText, reason) {
  const body = { decision };
  if (decision === "approve") {
    let edited;
    try {
      edited = JSON.parse(editedText);
    } catch (e) {
      throw new Error(`the arguments are not valid JSON: ${e.message}`);
    }
    if (JSON.stringify(edited) !== JSON.stringify(original ?? {})) body.args = edited;
  } else if (reason && reason.trim()) {
    body.reason = reason.trim();
  }
  return body;
}

/** The decision controls of a pending approval. `post(body)` sends the decision. */
export function decisionForm(approval, post) {
  const pretty = JSON.stringify(approval.args ?? {}, null, 2);
  const editor = h("textarea.args-editor", { rows: String(Math.min(12, pretty.split("\n").length + 1)), spellcheck: "false", "aria-label": "Arguments to approve with" });
  editor.value = pretty;
  const reason = h("input.deny-reason", { type: "text", placeholder: "Reason (told to the model)", "aria-label": "Reason for denying" });
  const note = h("span.decide-note", { role: "status" });
  const send = async (decision) => {
    let body;
    try {
      body = decisionBody(decision, approval.args, editor.value, reason.value);
    } catch (e) {
      note.textContent = e.message;
      return;
    }
    note.textContent = "";
    try {
      await post(body);
      note.textContent = body.args ? "approved with edited arguments" : `${decision === "approve" ? "approved" : "denied"}`;
    } catch (e) {
      note.textContent = `the ${decision} was not taken: ${e.detail || e.message}`;
    }
  };
  // A tool marked `confirm = true`: Approve first shows what will run, and only "Yes, run
  // it" sends the approval; "Back" sends nothing.
  const confirmRow = h("div.confirm-step", { hidden: true, role: "alertdialog", "aria-label": "Confirm the approval" });
  const approve = () => {
    if (!approval.confirm) return send("approve");
    let shown;
    try {
      shown = JSON.stringify(JSON.parse(editor.value));
    } catch (e) {
      note.textContent = `the arguments are not valid JSON: ${e.message}`;
      return;
    }
    fill(confirmRow,
      h("span", {}, `Run ${approval.tool} with ${shown}?`),
      h("button.primary.confirm-yes", { type: "button", onclick: () => { confirmRow.hidden = true; send("approve"); } }, "Yes, run it"),
      h("button.confirm-back", { type: "button", onclick: () => { confirmRow.hidden = true; } }, "Back"));
    confirmRow.hidden = false;
  };
  return h("div.decision", {},
    h("details.edit", {}, h("summary", {}, "Edit arguments before approving"), editor),
    h("div.decide", {},
      h("button.primary", { type: "button", onclick: approve }, approval.confirm ? "Approve…" : "Approve"),
      reason,
      h("button.danger", { type: "button", onclick: () => send("deny") }, "Deny")),
    confirmRow,
    note);
}

/** The Approvals page: pending approvals of every session, refreshed every 2 s. */
export function approvalsPage(main, api, canWrite, setTeardown) {
  document.title = "Approvals · callbackd";
  const list = h("ul.approvals-list");
  const status = h("p.muted", { role: "status" }, "Loading…");
  fill(main, h("div.page-head", {}, h("h1", {}, "Approvals")), status, list);
  let alive = true;
  const cards = new Map();
  async function load() {
    try {
      const page = await api.get("/v1/approvals");
      if (!alive) return;
      const ids = new Set();
      for (const a of page.approvals || []) {
        ids.add(a.id);
        let card = cards.get(a.id);
        if (!card) {
          const left = h("span.time-left");
          const question = a.tool === ASK_USER;
          card = { li: h(question ? "li.item.approval.question" : "li.item.approval", { dataset: { approvalId: a.id } },
            h("div.approval-head", {},
              // A question is a question, not an approval of the ask_user tool.
              h("span.label", {}, question ? "question" : "approval"), question ? null : h("span.tool-name", {}, a.tool),
              a.run_id ? h("a.small", { href: `#/runs/${api.enc(a.run_id)}` }, "run") : null,
              h("a.small", { href: `#/sessions/${api.enc(a.session_id)}` }, "session"),
              h("time", { datetime: a.created_at }, when(a.created_at)), left),
            a.tool === ASK_USER
              ? h("p.question-text", {}, a.args?.question ?? "")
              : h("pre.args", {}, JSON.stringify(a.args ?? {}, null, 2)),
            !canWrite() ? null
              : a.tool === ASK_USER && a.run_id
                ? questionForm({ id: a.id, options: a.args?.options }, (answer) => api.post(`/v1/runs/${api.enc(a.run_id)}/resume`, { question_id: a.id, answer }).then(load))
                : decisionForm(a, (body) => api.post(`/v1/approvals/${api.enc(a.id)}`, body).then(load))), left, expires: a.expires_at };
          cards.set(a.id, card);
          list.append(card.li);
        }
        card.left.textContent = timeLeft(card.expires);
      }
      for (const [id, card] of cards) {
        if (!ids.has(id)) {
          card.li.remove();
          cards.delete(id);
        }
      }
      status.textContent = cards.size ? "" : "Nothing waits for a decision.";
    } catch (e) {
      if (alive) status.textContent = e.detail || e.message || String(e);
    }
  }
  load();
  const timer = setInterval(load, 2000);
  setTeardown(() => { alive = false; clearInterval(timer); });
}

/** Keeps the header's count badge of pending approvals current (every 5 s). */
export function watchCount(badgeEl, api) {
  async function tick() {
    try {
      const page = await api.get("/v1/approvals");
      const n = (page.approvals || []).length;
      badgeEl.textContent = n ? String(n) : "";
      badgeEl.hidden = !n;
    } catch {
      // not signed in yet, or the daemon is away: try again later
    }
  }
  tick();
  return setInterval(tick, 5000);
}
