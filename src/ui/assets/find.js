// Runs of every session, found by status, time and text (issue 21): GET /v1/runs.

import { h, fill, short, stamp, preview } from "./dom.js";

export const RUN_STATUSES = ["queued", "running", "finished", "error", "cancelled", "expired"];

/** A date field's value as the API's `since`/`until`: an ISO date (YYYY-MM-DD, a UTC day),
 * typed as such whatever the browser's locale (a date picker shows mm/dd/yyyy in en-US). */
export function day(text) {
  const t = (text || "").trim();
  if (!t) return "";
  return /^\d{4}-\d{2}-\d{2}$/.test(t) && !Number.isNaN(Date.parse(`${t}T00:00:00Z`)) ? t : null;
}

export function runsPage(main, api, setTeardown) {
  document.title = "Runs · callbackd";
  let alive = true;
  setTeardown(() => { alive = false; });
  const q = h("input", { id: "runs-q", type: "search", name: "q", placeholder: "input, output or session name", autocomplete: "off" });
  const status = h("select", { id: "runs-status", name: "status", "aria-label": "Status" },
    h("option", { value: "" }, "any status"), RUN_STATUSES.map((s) => h("option", { value: s }, s)));
  const dateField = (id, label) => h("input", { id, type: "text", name: id.slice(5), "aria-label": `${label} (YYYY-MM-DD, UTC)`,
    placeholder: "YYYY-MM-DD", inputmode: "numeric", maxlength: 10, size: 10, autocomplete: "off" });
  const since = dateField("runs-since", "From");
  const until = dateField("runs-until", "Before");
  const form = h("form.search", { role: "search", "aria-label": "Find runs" },
    h("label", { for: "runs-q" }, "Find"), q, status,
    h("span.range", {}, since, "–", until),
    h("button", { type: "submit", id: "runs-search" }, "Search"));
  const bad = h("p.failure", { role: "alert", hidden: true });
  const body = h("tbody");
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const note = h("p.muted", { role: "status" }, "Loading…");
  fill(main, h("h1", {}, "Runs"), form, bad,
    h("div.table-wrap", {}, h("table.runs-all", {},
      h("thead", {}, h("tr", {}, h("th.c-run", {}, "Run"), h("th.c-status", {}, "Status"), h("th.c-when", {}, "Created"),
        h("th.c-in", {}, "Asked"), h("th.c-out", {}, "Output"))),
      body)),
    note, more);
  let cursor = null;
  let filter = "";
  async function load() {
    more.disabled = true;
    try {
      const page = await api.get(`/v1/runs?limit=25${filter ? `&${filter}` : ""}${cursor ? `&cursor=${api.enc(cursor)}` : ""}`);
      if (!alive) return;
      for (const r of page.runs || []) {
        const out = r.error ? r.error.detail || r.error.title : r.output;
        body.append(h("tr", { dataset: { runId: r.run_id } },
          h("td.c-run", {}, h("a", { href: `#/runs/${api.enc(r.run_id)}`, title: `run ${r.run_id}` }, `turn ${r.turn_number ?? "?"}`),
            h("div.small", {}, h("a", { href: `#/sessions/${api.enc(r.session_id)}`, title: `session ${r.session_id}` }, h("code", {}, short(r.session_id))))),
          h("td.c-status", {}, h(`span.badge.status-${r.status}`, {}, r.status)),
          h("td.c-when", {}, stamp(r.created_at)),
          h("td.c-in", { "data-label": "Asked" }, preview(r.input?.text ?? "")),
          h("td.c-out", { "data-label": r.error ? "Error" : "Output" }, preview(out || ""))));
      }
      cursor = page.next_cursor || null;
      more.hidden = !cursor;
      note.textContent = body.children.length ? "" : filter ? "No runs match." : "No runs yet.";
    } catch (e) {
      if (alive) fill(note, h("p.failure", { role: "alert" }, e.detail || e.message));
    } finally {
      more.disabled = false;
    }
  }
  const search = () => {
    const p = new URLSearchParams();
    if (q.value.trim()) p.set("q", q.value.trim());
    if (status.value) p.set("status", status.value);
    const from = day(since.value);
    const to = day(until.value);
    if (from === null || to === null) {
      bad.textContent = `A date is written YYYY-MM-DD (a UTC day), e.g. ${new Date().toISOString().slice(0, 10)}.`;
      bad.hidden = false;
      (from === null ? since : until).focus();
      return;
    }
    bad.hidden = true;
    if (from) p.set("since", from);
    if (to) p.set("until", to);
    filter = p.toString();
    cursor = null;
    body.replaceChildren();
    note.textContent = "Loading…";
    load();
  };
  form.addEventListener("submit", (e) => { e.preventDefault(); search(); });
  status.addEventListener("change", search);
  more.addEventListener("click", load);
  load();
}
