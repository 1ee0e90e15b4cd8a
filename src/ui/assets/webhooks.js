// The webhooks' line of the console's usage and operations page (issue 40): how the
// namespace's recent deliveries went, from GET /v1/webhooks/deliveries, and the last failure
// with its error. `callbackd webhooks` lists them one by one.

import { h, fill } from "./dom.js";

/** One sentence about `deliveries` (newest first), or null when there are none. */
export function webhooksSummary(deliveries) {
  if (!deliveries.length) return null;
  const count = (s) => deliveries.filter((d) => d.state === s).length;
  let text = `Webhooks (last ${deliveries.length}): ${count("delivered")} delivered, ` +
    `${count("pending")} pending, ${count("failed")} failed`;
  const failing = deliveries.find((d) => d.last_error);
  if (failing) {
    text += `; last failure: ${failing.type} to ${failing.url}: ${failing.last_error}` +
      (failing.state === "pending" ? ` (${failing.attempts} attempts, next ${failing.next_attempt_at})` : ` (${failing.state})`);
  }
  return text;
}

/** A paragraph that fills itself with the summary (nothing when no webhook was ever sent). */
export function webhooksLine(api, alive) {
  const p = h("p.webhooks.small", { role: "status" });
  (async () => {
    try {
      const list = await api.get("/v1/webhooks/deliveries?limit=100");
      const text = webhooksSummary(list.deliveries || []);
      if (alive() && text) fill(p, text);
    } catch (e) {
      if (alive()) fill(p, `Webhooks: ${e.detail || e.message}`);
    }
  })();
  return p;
}
