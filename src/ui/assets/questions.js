// Question cards (issue 25): a held `ask_user` call asks the person watching. Its options are
// buttons, and a text field takes an answer in the person's own words. The answer goes to
// POST /v1/runs/{run_id}/resume {question_id, answer} and becomes the tool's result, which the
// model reads; a refusal (the question expired, or was answered elsewhere) is shown, never
// swallowed.
import { h } from "./dom.js";

/** The controls of an open question. `send(answer)` posts it (a promise). */
export function questionForm(question, send) {
  const note = h("span.answer-note", { role: "status" });
  const text = h("input.answer-text", { type: "text", placeholder: "Your answer", "aria-label": "Your answer" });
  const buttons = [];
  const answer = async (value) => {
    if (!value || !value.trim()) {
      note.textContent = "write an answer, or pick one of the options";
      return;
    }
    for (const b of buttons) b.disabled = true;
    note.textContent = "";
    try {
      await send(value.trim());
      note.textContent = `answered: ${value.trim()}`;
    } catch (e) {
      note.textContent = `the answer was not taken: ${e.detail || e.message}`;
      for (const b of buttons) b.disabled = false;
    }
  };
  const options = (question.options || []).map((o) => {
    const b = h("button.option", { type: "button", onclick: () => answer(o) }, o);
    buttons.push(b);
    return b;
  });
  const submit = h("button.primary", { type: "button", onclick: () => answer(text.value) }, "Answer");
  buttons.push(submit);
  text.addEventListener("keydown", (e) => {
    if (e.key === "Enter") answer(text.value);
  });
  return h("div.question-form", {},
    options.length ? h("div.options", {}, ...options) : null,
    h("div.answer", {}, text, submit),
    note);
}

/** What a question card says once it is no longer open. */
export function questionOutcome(item) {
  if (item.decision === "approved") return `answered${item.answer !== undefined && item.answer !== null ? ` "${item.answer}"` : ""}${item.by ? ` by ${item.by}` : ""}`;
  return `${item.decision}${item.by ? ` by ${item.by}` : ""}: the model was told it got no answer`;
}
