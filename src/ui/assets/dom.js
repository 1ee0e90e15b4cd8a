// Small DOM helpers. Text always goes in through textContent, never innerHTML: everything the
// console shows (assistant text, tool names, error details) comes from agents and models.

/** h("tag.class", {attr: value, onclick: fn}, ...children) -> Element */
export function h(spec, attrs = {}, ...children) {
  const [tag, ...classes] = spec.split(".");
  const el = document.createElement(tag || "div");
  if (classes.length) el.className = classes.join(" ");
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** "2026-12-01T10:00:00Z" -> local "Dec 1 10:00:00": a date on every time (a list spans
 * days; "10:00" alone is ambiguous), the year only when it is not this one. */
export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const date = d.toLocaleDateString("en-US", { month: "short", day: "numeric", ...(d.getFullYear() === new Date().getFullYear() ? {} : { year: "numeric" }) });
  return `${date} ${d.toLocaleTimeString("en-GB", { hour12: false })}`;
}

/** The full local date and time with its zone, for a `title` (hover). */
export function full(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toString();
}

/** A <time>: the short local time with its date, the full date on hover. */
export function stamp(iso) {
  if (!iso) return null;
  return h("time", { datetime: iso, title: full(iso) }, when(iso));
}

/** A long text cut to one line; clicking it (or Enter on it) shows all of it, and again cuts it. */
export function preview(text) {
  const t = text || "";
  const el = h("span.preview", { title: t.length > 60 ? t.slice(0, 2000) : null, tabindex: t.length > 60 ? 0 : null, role: t.length > 60 ? "button" : null, "aria-expanded": t.length > 60 ? "false" : null }, t);
  if (t.length > 60) {
    const toggle = (e) => {
      e.preventDefault();
      const open = el.classList.toggle("open");
      el.setAttribute("aria-expanded", String(open));
    };
    el.addEventListener("click", toggle);
    el.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") toggle(e); });
  }
  return el;
}

export function ms(n) {
  if (n === undefined || n === null) return "";
  return n < 1000 ? `${n} ms` : `${(n / 1000).toFixed(n < 10000 ? 2 : 1)} s`;
}

export function short(id) {
  return id && id.length > 12 ? id.slice(0, 8) + "…" : id || "";
}
