// A terminal chat with a Cursor agent through callbackd's AG-UI endpoint (POST /v1/ag-ui),
// with the official AG-UI client. Approvals and questions arrive as AG-UI interrupts: the
// chat asks you, and answers them with `resume` on the next run of the thread.
//
//   cd examples/ag_ui && npm install
//   node chat.mjs --url http://127.0.0.1:7420 --token "$API_TOKEN" [--thread my-thread] [--model composer-2]
//
// The API token is `api_token` in callbackd.tokens beside the database. The thread is a
// callbackd session: `GET /v1/sessions/<thread>` shows it, and the web console (/ui/) shows
// its runs and approvals as they happen. Ctrl-D ends the chat.
import { HttpAgent } from "@ag-ui/client";
import { createInterface } from "node:readline";
import { randomUUID } from "node:crypto";

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const url = arg("url", "http://127.0.0.1:7420").replace(/\/$/, "");
const token = arg("token", process.env.API_TOKEN);
if (!token) throw new Error("--token (or API_TOKEN) is the run API's bearer token");
const model = arg("model");

const agent = new HttpAgent({
  url: `${url}/v1/ag-ui`,
  headers: { Authorization: `Bearer ${token}` },
  threadId: arg("thread", `chat-${randomUUID().slice(0, 8)}`),
});
// Lines typed (or piped in), buffered until asked for; `null` once input ends.
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function ask(prompt) {
  process.stdout.write(prompt);
  const { value, done } = await lines.next();
  if (done) return null;
  if (!process.stdin.isTTY) process.stdout.write(`${value}\n`);
  return value;
}
console.error(`thread ${agent.threadId} (GET ${url}/v1/sessions/${agent.threadId})`);

// What the run shows as it happens.
const show = {
  onTextMessageContentEvent: ({ event }) => { process.stdout.write(event.delta); },
  onTextMessageEndEvent: () => { process.stdout.write("\n"); },
  onToolCallEndEvent: ({ toolCallName, toolCallArgs }) => {
    console.log(`  [tool ${toolCallName} ${JSON.stringify(toolCallArgs)}]`);
  },
  onToolCallResultEvent: ({ event }) => { console.log(`  [result ${String(event.content).slice(0, 200)}]`); },
  onRunErrorEvent: ({ event }) => { console.log(`  [the run failed: ${event.message}]`); },
};

// Asks the person about each interrupt; the answers for `resume`.
async function answers(interrupts) {
  const resume = [];
  for (const i of interrupts) {
    if (i.reason === "input_required") {
      const options = i.responseSchema?.properties?.answer?.examples ?? [];
      const a = (await ask(`? ${i.message}${options.length ? ` (${options.join(" / ")})` : ""} `)) ?? "";
      resume.push({ interruptId: i.id, status: "resolved", payload: { answer: a } });
    } else {
      const a = (await ask(`? ${i.message} [y/N] `)) ?? "";
      const approved = /^y(es)?$/i.test(a.trim());
      resume.push({ interruptId: i.id, status: "resolved", payload: approved ? { approved } : { approved, reason: "declined in the chat" } });
    }
  }
  return resume;
}

for (;;) {
  const text = await ask("> ");
  if (text === null) break; // Ctrl-D
  if (!text.trim()) continue;
  agent.addMessage({ id: randomUUID(), role: "user", content: text });
  let params = { forwardedProps: model ? { model } : {} };
  // One user turn may take several AG-UI runs: each interrupt ends one, its answer starts the next.
  for (;;) {
    try {
      await agent.runAgent(params, show);
    } catch (e) {
      console.log(`  [refused: ${e.message}]`);
      break;
    }
    if (agent.pendingInterrupts.length === 0) break;
    params = { resume: await answers(agent.pendingInterrupts) };
  }
}
process.stdout.write("\n");
