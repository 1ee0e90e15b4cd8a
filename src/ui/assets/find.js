// Runs of every session, found by status, time and text (issue 21): GET /v1/runs.

import { h, fill, when, short } from "./dom.js";

export const RUN_STATUSES = ["queued", "running", "finished", "error", "cancelled", "expired"];

/** A date input's value (local calendar day) as the API's `since`/`until` (a date, UTC). */
const day = (input) => input.value || "";

/** Full date and time, for a `title` (hover). */
export const full = (iso) => (iso ? new Date(iso).toString() : "");

export function runsPage(main, api, setTeardown) {
  document.title = "Runs · callbackd";
  let alive = true;
  setTeardown(() => { alive = false; });
  const q = h("input", { id: "runs-q", type: "search", name: "q", placeholder: "input, output or session name", autocomplete: "off" });
  const status = h("select", { id: "runs-status", name: "status", "aria-label": "Status" },
    h("option", { value: "" }, "any status"), RUN_STATUSES.map((s) => h("option", { value: s }, s)));
  const since = h("input", { id: "runs-since", type: "date", name: "since", "aria-label": "From" });
  const until = h("input", { id: "runs-until", type: "date", name: "until", "aria-label": "Before" });
  const form = h("form.search", { role: "search", "aria-label": "Find runs" },
    h("label", { for: "runs-q" }, "Find"), q, status,
    h("span.range", {}, since, "–", until),
    h("button", { type: "submit", id: "runs-search" }, "Search"));
  const body = h("tbody");
  const more = h("button", { type: "button", hidden: true }, "Load more");
  const note = h("p.muted", { role: "status" }, "Loading…");
  fill(main, h("h1", {}, "Runs"), form,
    h("div.table-wrap", {}, h("table.runs-all", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Run"), h("th", {}, "Status"), h("th", {}, "Created"),
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
          h("td", {}, h("a", { href: `#/runs/${api.enc(r.run_id)}` }, `#${r.turn_number ?? "?"}`), " ",
            h("a.small", { href: `#/sessions/${api.enc(r.session_id)}` }, h("code", {}, short(r.session_id)))),
          h("td", {}, h(`span.badge.status-${r.status}`, {}, r.status)),
          h("td", {}, h("time", { datetime: r.created_at, title: full(r.created_at) }, when(r.created_at))),
          h("td.c-in", {}, h("span.preview", {}, r.input?.text ?? "")),
          h("td.c-out", {}, h("span.preview", {}, out ? out.slice(0, 160) : ""))));
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
    if (day(since)) p.set("since", day(since));
    if (day(until)) p.set("until", day(until));
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
