// Usage over time (issue 21): tokens per day as a bar chart (SVG, drawn from attributes: the
// page's CSP allows no inline style) and a table per day, and runs by status, from
// GET /v1/usage?group_by=day.

import { h, fill } from "./dom.js";
import { webhooksLine } from "./webhooks.js";

const SVG = "http://www.w3.org/2000/svg";
const svg = (tag, attrs = {}, ...children) => {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c);
  return el;
};
const n = (x) => Number(x || 0).toLocaleString();
const total = (t) => t.input + t.output + t.cache_read + t.cache_write;

/** A round number at or above `x` (1, 2, 2.5 or 5 times a power of ten): the axis's top. */
export function niceMax(x) {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

/** 1200 -> "1.2k", 3400000 -> "3.4M": an axis label that fits. */
export function compact(v) {
  if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (v >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return String(v);
}

const DAY_MS = 86400000;

/** The bar chart of tokens per day over the window's 30 UTC days (a day without runs is an
 * empty slot, so one bar is one day, not the whole chart): input and output stacked, a y axis
 * with its scale and grid lines, the days on the x axis; cache tokens in the hover text. */
export function chart(groups, days = 30) {
  const w = 640, hgt = 170, left = 44, right = 8, top = 22, bottom = 22;
  const last = groups.reduce((m, g) => (g.key > m ? g.key : m), new Date().toISOString().slice(0, 10));
  const end = Date.parse(`${last}T00:00:00Z`);
  const slot = (w - left - right) / days;
  const bw = Math.max(3, Math.min(28, slot - 3));
  const max = niceMax(Math.max(...groups.map((g) => g.tokens.input + g.tokens.output), 0));
  const y = (v) => top + hgt - (v / max) * hgt;
  const root = svg("svg", { viewBox: `0 0 ${w} ${top + hgt + bottom}`, class: "chart", role: "img",
    "aria-label": `Tokens per day over the last ${days} days (UTC), input and output stacked; the table below has the numbers` });
  // The y axis: 0, half and the top, with grid lines.
  for (const v of [0, max / 2, max]) {
    root.append(svg("line", { class: v ? "grid" : "axis", x1: left, x2: w - right, y1: y(v), y2: y(v) }),
      svg("text", { class: "tick y", x: left - 6, y: y(v) + 4, "text-anchor": "end" }, document.createTextNode(compact(v))));
  }
  root.append(svg("text", { class: "tick unit", x: 2, y: 11 }, document.createTextNode("tokens per day")));
  // The x axis: every 5th day, and the last.
  for (let i = 0; i < days; i++) {
    const dayMs = end - (days - 1 - i) * DAY_MS;
    if (i % 5 !== (days - 1) % 5) continue;
    const label = new Date(dayMs).toISOString().slice(5, 10);
    root.append(svg("text", { class: "tick x", x: left + i * slot + slot / 2, y: top + hgt + 16, "text-anchor": "middle" }, document.createTextNode(label)));
  }
  for (const g of groups) {
    const i = days - 1 - Math.round((end - Date.parse(`${g.key}T00:00:00Z`)) / DAY_MS);
    if (i < 0 || i >= days) continue;
    const x = left + i * slot + (slot - bw) / 2;
    const hi = (g.tokens.input / max) * hgt;
    const ho = (g.tokens.output / max) * hgt;
    const tip = `${g.key}: ${n(g.tokens.input)} input, ${n(g.tokens.output)} output, ` +
      `${n(g.tokens.cache_read)} cache read, ${n(g.tokens.cache_write)} cache write tokens; ${g.runs} runs`;
    root.append(svg("g", { class: "day", "data-day": g.key },
      svg("title", {}, document.createTextNode(tip)),
      svg("rect", { class: "in", x, y: top + hgt - hi, width: bw, height: Math.max(hi, 0) }),
      svg("rect", { class: "out", x, y: top + hgt - hi - ho, width: bw, height: Math.max(ho, 0) })));
  }
  return root;
}

export function usagePage(main, api, setTeardown) {
  document.title = "Usage · callbackd";
  let alive = true;
  setTeardown(() => { alive = false; });
  const out = h("div", { id: "usage" }, h("p.muted", { role: "status" }, "Loading…"));
  fill(main, h("h1", {}, "Usage"), h("p.muted", {}, "Tokens of the runs created in the last 30 days, per UTC day."), out,
    webhooksLine(api, () => alive));
  (async () => {
    try {
      const u = await api.get("/v1/usage?group_by=day");
      if (!alive) return;
      const byStatus = Object.entries(u.total.runs_by_status);
      fill(out,
        h("p.totals", {}, h("strong", {}, n(total(u.total.tokens))), " tokens in ", h("strong", {}, n(u.total.runs)), " runs: ",
          byStatus.length ? byStatus.map(([s, c], i) => [i ? ", " : "", h(`span.badge.status-${s}`, {}, s), ` ${c}`]) : "none"),
        u.groups.length ? [h("div.chart-wrap", {}, chart(u.groups)),
          h("p.legend.small", {}, h("span.key.in", {}), " input ", h("span.key.out", {}), " output")] : h("p.muted", {}, "No runs in this window."),
        h("div.table-wrap", {}, h("table.usage", {},
          h("thead", {}, h("tr", {}, h("th", {}, "Day"), h("th", {}, "Runs"), h("th", {}, "Input"), h("th", {}, "Output"),
            h("th.c-cache", {}, "Cache read"), h("th.c-cache", {}, "Cache write"), h("th", {}, "By status"))),
          h("tbody", {}, u.groups.map((g) => h("tr", { dataset: { day: g.key } },
            h("td", {}, g.key), h("td", {}, n(g.runs)), h("td", {}, n(g.tokens.input)), h("td", {}, n(g.tokens.output)),
            h("td.c-cache", {}, n(g.tokens.cache_read)), h("td.c-cache", {}, n(g.tokens.cache_write)),
            h("td", {}, Object.entries(g.runs_by_status).map(([s, c]) => `${s} ${c}`).join(", "))))))));
    } catch (e) {
      if (alive) fill(out, h("p.failure", { role: "alert" }, e.detail || e.message));
    }
  })();
}
