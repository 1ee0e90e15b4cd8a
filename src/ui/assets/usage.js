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

/** The bar chart of tokens per day (input and output stacked; cache in the hover text). */
export function chart(groups) {
  const w = 600, hgt = 160, pad = 4;
  const max = Math.max(1, ...groups.map((g) => g.tokens.input + g.tokens.output));
  const bw = Math.max(4, Math.min(48, (w - pad * 2) / Math.max(1, groups.length) - 4));
  const root = svg("svg", { viewBox: `0 0 ${w} ${hgt + 18}`, class: "chart", role: "img",
    "aria-label": `Tokens per day, ${groups.length} days` });
  groups.forEach((g, i) => {
    const x = pad + i * (bw + 4);
    const hi = ((g.tokens.input) / max) * hgt;
    const ho = ((g.tokens.output) / max) * hgt;
    const tip = `${g.key}: ${n(g.tokens.input)} input, ${n(g.tokens.output)} output, ` +
      `${n(g.tokens.cache_read)} cache read, ${n(g.tokens.cache_write)} cache write tokens; ${g.runs} runs`;
    root.append(svg("g", { class: "day", "data-day": g.key },
      svg("title", {}, document.createTextNode(tip)),
      svg("rect", { class: "in", x, y: hgt - hi, width: bw, height: Math.max(hi, 0) }),
      svg("rect", { class: "out", x, y: hgt - hi - ho, width: bw, height: Math.max(ho, 0) }),
      svg("text", { x: x + bw / 2, y: hgt + 14, "text-anchor": "middle" }, document.createTextNode(g.key.slice(5)))));
  });
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
