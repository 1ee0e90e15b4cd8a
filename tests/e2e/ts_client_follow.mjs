// Drives @callbackd/client (clients/typescript) for test_clients_e2e.py:
//   node ts_client_follow.mjs <baseUrl> <token> send <sessionId> <text>
//   node ts_client_follow.mjs <baseUrl> <token> follow <runId> [after]
// Prints each event the client yields as one JSON line (JSON.stringify of the parsed event),
// then exits 0 when the iteration ended; on an error, prints {"error": name, status, code} and
// exits 3.
import { Client } from "../../clients/typescript/src/index.js";

const [baseUrl, token, mode, id, arg] = process.argv.slice(2);
const client = new Client({ baseUrl, token });
const events = mode === "send" ? client.sendMessage(id, arg) : client.followRun(id, { after: arg ? Number(arg) : undefined });
try {
  for await (const ev of events) process.stdout.write(JSON.stringify(ev) + "\n");
} catch (e) {
  process.stdout.write(JSON.stringify({ error: e.name, status: e.status ?? null, code: e.code ?? null, message: e.message }) + "\n");
  process.exitCode = 3;
}
