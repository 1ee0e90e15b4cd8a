// Sessions you can find, name and delete (issue 21): the search form of the sessions list and
// the rename / delete controls of a session's page. Both are clients of /v1 only:
// GET /v1/sessions?q=&status=, PATCH and DELETE /v1/sessions/{id}.

import { h } from "./dom.js";

export const SESSION_STATUSES = ["idle", "running", "error", "archived"];

/** The sessions list's search: `onChange("q=…&status=…")` on submit or a new status. */
export function sessionSearch(onChange) {
  const q = h("input", { id: "session-q", type: "search", name: "q", placeholder: "name or id", autocomplete: "off" });
  const status = h("select", { id: "session-status", name: "status", "aria-label": "Status" },
    h("option", { value: "" }, "any status"),
    SESSION_STATUSES.map((s) => h("option", { value: s }, s)));
  const f = h("form.search", { role: "search", "aria-label": "Find sessions" },
    h("label", { for: "session-q" }, "Find"), q, status, h("button", { type: "submit", id: "session-search" }, "Search"));
  const params = () => {
    const p = new URLSearchParams();
    if (q.value.trim()) p.set("q", q.value.trim());
    if (status.value) p.set("status", status.value);
    return p.toString();
  };
  f.addEventListener("submit", (e) => { e.preventDefault(); onChange(params()); });
  status.addEventListener("change", () => onChange(params()));
  return f;
}

/** Rename and delete (with a confirmation) for a session page; write tokens only. */
export function sessionActions(api, session, { onRenamed, onDeleted }) {
  const path = `/v1/sessions/${api.enc(session.session_id)}`;
  const err = h("p.failure", { role: "alert", hidden: true });
  const fail = (what, e) => { err.textContent = `${what}: ${e.detail || e.message}`; err.hidden = false; };

  const name = h("input", { id: "session-name", name: "name", value: session.name || "", maxlength: 200, required: true, autocomplete: "off" });
  const save = h("button", { type: "submit", id: "rename" }, "Rename");
  const rename = h("form.rename", { "aria-label": "Rename the session" }, h("label", { for: "session-name" }, "Name"), name, save);
  rename.addEventListener("submit", async (e) => {
    e.preventDefault();
    err.hidden = true;
    save.disabled = true;
    try {
      onRenamed(await api.json("PATCH", path, { name: name.value }));
    } catch (e2) {
      fail("Not renamed", e2);
    } finally {
      save.disabled = false;
    }
  });

  const del = h("button.danger", { type: "button", id: "delete-session" }, "Delete session…");
  const yes = h("button.danger", { type: "button", id: "delete-confirm" }, "Delete");
  const no = h("button", { type: "button", id: "delete-keep" }, "Keep");
  const confirm = h("div.confirm", { role: "group", "aria-label": "Confirm the deletion", hidden: true },
    h("span", {}, "Delete this session with all its runs, events and tool calls? This cannot be undone."), yes, no);
  del.addEventListener("click", () => { confirm.hidden = false; del.hidden = true; no.focus(); });
  no.addEventListener("click", () => { confirm.hidden = true; del.hidden = false; del.focus(); });
  yes.addEventListener("click", async () => {
    err.hidden = true;
    yes.disabled = true;
    try {
      await api.json("DELETE", path);
      onDeleted();
    } catch (e) {
      fail("Not deleted", e);
      yes.disabled = false;
    }
  });
  return h("div.session-actions", {}, rename, h("div.delete", {}, del, confirm), err);
}
