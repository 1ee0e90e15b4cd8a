// Drives POST /v1/ag-ui with the official AG-UI client (@ag-ui/client's HttpAgent: its SSE
// parser, verifyEvents and message/interrupt bookkeeping) for tests/e2e/test_ag_ui_e2e.py.
// One HttpAgent per process (one thread); commands come as JSON lines on stdin, one answer
// line each on stdout:
//   {"op": "user", "text": "..."}                       add a user message
//   {"op": "tool", "toolCallId": "...", "content": "..."} add a tool message (a frontend tool's result)
//   {"op": "run", "params": {runId?, resume?, tools?, forwardedProps?}}
//     -> {ok, events (as the client applied them), raw (the SSE events as sent), schemaErrors
//         (EventSchema over every raw event), result, pendingInterrupts, messages} or
//        {ok: false, error, status, payload, ...}
// Env: AGUI_URL (…/v1/ag-ui), AGUI_TOKEN, AGUI_THREAD.
import { HttpAgent } from "@ag-ui/client";
import { EventSchema } from "@ag-ui/core/schemas";
import { createInterface } from "node:readline";
import { randomUUID } from "node:crypto";

// Every response body is teed: the raw events are what the daemon sent, before the client's
// own parsing strips anything.
let raw = [];
const realFetch = globalThis.fetch;
globalThis.fetch = async (...args) => {
  const res = await realFetch(...args);
  if (!res.body || !(res.headers.get("content-type") || "").startsWith("text/event-stream")) return res;
  const [mine, theirs] = res.body.tee();
  (async () => {
    const dec = new TextDecoder();
    let buf = "";
    for await (const chunk of mine) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, ""));
        if (data.length) raw.push(JSON.parse(data.join("\n")));
      }
    }
  })();
  return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
};

const agent = new HttpAgent({
  url: process.env.AGUI_URL,
  headers: { Authorization: `Bearer ${process.env.AGUI_TOKEN}` },
  threadId: process.env.AGUI_THREAD,
});

const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  if (cmd.op === "user") {
    agent.addMessage({ id: randomUUID(), role: "user", content: cmd.text });
    say({ ok: true });
    continue;
  }
  if (cmd.op === "tool") {
    agent.addMessage({ id: randomUUID(), role: "tool", toolCallId: cmd.toolCallId, content: cmd.content });
    say({ ok: true });
    continue;
  }
  raw = [];
  const events = [];
  try {
    const out = await agent.runAgent(cmd.params ?? {}, { onEvent: ({ event }) => { events.push(event); } });
    // The tee may still hold the last block for a moment after the client saw it.
    await new Promise((r) => setTimeout(r, 50));
    const schemaErrors = raw
      .map((e) => [e.type, EventSchema.safeParse(e)])
      .filter(([, r]) => !r.success)
      .map(([type, r]) => ({ type, error: r.error.message }));
    say({ ok: true, events, raw, schemaErrors, result: out.result ?? null,
          newMessages: out.newMessages, pendingInterrupts: agent.pendingInterrupts, messages: agent.messages });
  } catch (e) {
    await new Promise((r) => setTimeout(r, 50));
    say({ ok: false, error: String(e?.message ?? e), status: e?.status ?? null, payload: e?.payload ?? null, events, raw });
  }
}
