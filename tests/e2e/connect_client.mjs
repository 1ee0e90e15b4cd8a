// Calls callbackd's two callback services through the bridge's own Connect client library:
// connect-es 1.6.1 (@connectrpc/connect + @connectrpc/connect-node) and protobuf-es 1.10.0 from
// the cursor-sdk==1.1.0 wheel's node_modules, with the transport configured exactly as the
// bridge configures it (Connect protocol, JSON codec, HTTP/1.1, bearer token in an interceptor).
// The service and message types are defined here with proto3.makeMessageType from the contract's
// field tables, independently of callbackd's own .proto files.
//
// Usage: $NODE connect_client.mjs BASE_URL STORE_TOKEN TOOL_TOKEN [TOOL_BASE_URL]   (env BRIDGE_DIR)
//   TOOL_BASE_URL defaults to BASE_URL (callbackd serves both services on one port).
// Prints one JSON object on stdout: {"<step>": {"output": <json|null>} | {"error": {code, message}}}
// for every step below; the pytest side (test_connect_client.py) asserts on it.
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [BASE_URL, STORE_TOKEN, TOOL_TOKEN, TOOL_BASE_URL = BASE_URL] = process.argv.slice(2);
if (!BASE_URL || !STORE_TOKEN || !TOOL_TOKEN || !process.env.BRIDGE_DIR) {
  console.error("usage: BRIDGE_DIR=... node connect_client.mjs BASE_URL STORE_TOKEN TOOL_TOKEN");
  process.exit(2);
}
// Import a package's ESM entry from the bridge's node_modules (the way the bridge resolves it).
async function imp(pkg) {
  const dir = path.join(process.env.BRIDGE_DIR, "node_modules", pkg);
  const meta = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  const exp = meta.exports?.["."];
  const entry = (typeof exp === "string" ? exp : exp?.import?.default ?? exp?.import) ?? meta.module ?? meta.main;
  return import(pathToFileURL(path.join(dir, entry)).href);
}
const { proto3, Struct, MethodKind } = await imp("@bufbuild/protobuf");
const { createClient, ConnectError } = await imp("@connectrpc/connect");
const { createConnectTransport } = await imp("@connectrpc/connect-node");

// ---- sdk.v1 callback services (contract section 1.5) ----
const CallStoreRequest = proto3.makeMessageType("sdk.v1.CallStoreRequest", () => [
  { no: 1, name: "substore", kind: "scalar", T: 9 /* string */ },
  { no: 2, name: "method", kind: "scalar", T: 9 },
  { no: 3, name: "input", kind: "message", T: Struct },
]);
const CallStoreResponse = proto3.makeMessageType("sdk.v1.CallStoreResponse", () => [
  { no: 1, name: "output", kind: "message", T: Struct },
]);
const CallCustomToolRequest = proto3.makeMessageType("sdk.v1.CallCustomToolRequest", () => [
  { no: 1, name: "tool_name", kind: "scalar", T: 9 },
  { no: 2, name: "args", kind: "message", T: Struct },
  { no: 3, name: "tool_call_id", kind: "scalar", T: 9, opt: true },
  { no: 4, name: "agent_id", kind: "scalar", T: 9 },
]);
const CallCustomToolResponse = proto3.makeMessageType("sdk.v1.CallCustomToolResponse", () => [
  { no: 1, name: "result", kind: "message", T: Struct },
]);
const SdkStoreCallbackService = {
  typeName: "sdk.v1.SdkStoreCallbackService",
  methods: { callStore: { name: "CallStore", I: CallStoreRequest, O: CallStoreResponse, kind: MethodKind.Unary } },
};
const SdkCustomToolCallbackService = {
  typeName: "sdk.v1.SdkCustomToolCallbackService",
  methods: { callCustomTool: { name: "CallCustomTool", I: CallCustomToolRequest, O: CallCustomToolResponse, kind: MethodKind.Unary } },
};

function transport(token, baseUrl = BASE_URL) {
  return createConnectTransport({
    baseUrl,
    httpVersion: "1.1",
    useBinaryFormat: false,
    interceptors: [(next) => async (req) => { req.header.set("Authorization", `Bearer ${token}`); return await next(req); }],
  });
}
const store = createClient(SdkStoreCallbackService, transport(STORE_TOKEN));
const storeWrongToken = createClient(SdkStoreCallbackService, transport(TOOL_TOKEN));
const tools = createClient(SdkCustomToolCallbackService, transport(TOOL_TOKEN, TOOL_BASE_URL));
const toolsWithStoreToken = createClient(SdkCustomToolCallbackService, transport(STORE_TOKEN, TOOL_BASE_URL));

const out = {};
async function step(name, fn) {
  try { out[name] = { output: (await fn()) ?? null }; }
  catch (e) {
    const ce = ConnectError.from(e);
    out[name] = { error: { code: ce.code, codeName: codeName(ce.code), message: ce.rawMessage } };
  }
}
function codeName(c) {   // connect-es Code enum -> the Connect wire name
  return ["ok", "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists",
    "permission_denied", "resource_exhausted", "failed_precondition", "aborted", "out_of_range", "unimplemented",
    "internal", "unavailable", "data_loss", "unauthenticated"][c] ?? String(c);
}
// Exactly what the bridge does (bridge-local-agent-store.js): Struct.fromJsonString(JSON.stringify(input)).
async function callStore(substore, method, input, client = store) {
  const res = await client.callStore(new CallStoreRequest({ substore, method, input: Struct.fromJsonString(JSON.stringify(input ?? {})) }));
  return res.output ? res.output.toJson() : null;
}
async function callTool(toolName, args, agentId, toolCallId, client = tools) {
  const res = await client.callCustomTool(new CallCustomToolRequest({ toolName, args: Struct.fromJson(args), agentId, toolCallId }));
  return res.result ? res.result.toJson() : null;
}

// ---- store round trips ----
const sfx = Date.now().toString(36);
const A = `agent-connect-es-${sfx}`, B = `agent-connect-es-b-${sfx}`, R = `run-connect-es-${sfx}`, CWD = `/ws/connect-es-${sfx}`;
const agentA = {
  agentId: A, cwd: CWD, status: "idle", activeRunId: null, name: "connect-es", createdAt: 1764450000000, updatedAt: 1764450000001,
  latestCheckpoint: null, sdkMetadata: { blobEncryptionKey: "ab".repeat(32), hostTag: "kept" },
  hostExtra: { nested: [1, 2.5, "three", null, true, { deep: "ünïcödé ✓" }] },
};
const agentB = { ...agentA, agentId: B, name: "second", updatedAt: 1764450000002 };
const agentA2 = { ...agentA, status: "archived", updatedAt: 1764450000003, hostExtra: { replaced: true } };
Object.assign(out, { agentA, agentB, agentA2, runId: R });

await step("agents.get.miss", () => callStore("agents", "get", { agentId: A }));
await step("agents.create", () => callStore("agents", "create", { agent: agentA }));
await step("agents.create.duplicate", () => callStore("agents", "create", { agent: agentA }));
await step("agents.get", () => callStore("agents", "get", { agentId: A }));
await step("agents.create.b", () => callStore("agents", "create", { agent: agentB }));
await step("agents.list", () => callStore("agents", "list", { filter: { cwd: CWD } }));
await step("agents.list.page1", () => callStore("agents", "list", { filter: { cwd: CWD, limit: 1 } }));
await step("agents.list.page2", async () => {
  const c = out["agents.list.page1"].output?.nextCursor;
  return callStore("agents", "list", { filter: { cwd: CWD, limit: 1, cursor: c } });
});
await step("agents.update", () => callStore("agents", "update", { agent: agentA2 }));
await step("agents.get.updated", () => callStore("agents", "get", { agentId: A }));

await step("runEvents.append.1", () => callStore("runEvents", "append", { runId: R, eventType: "run_stream_event", payload: { n: 1, text: "first" } }));
await step("runEvents.append.2", () => callStore("runEvents", "append", { runId: R, eventType: "run_stream_event", payload: { n: 2 } }));
await step("runEvents.append.3", () => callStore("runEvents", "append", { runId: R, eventType: "run_stream_event", payload: null, idempotencyKey: "k3" }));
await step("runEvents.append.3again", () => callStore("runEvents", "append", { runId: R, eventType: "other", payload: { differs: true }, idempotencyKey: "k3" }));
await step("runEvents.list", () => callStore("runEvents", "list", { runId: R }));
await step("runEvents.list.after1", () => callStore("runEvents", "list", { runId: R, afterOffset: "1" }));
await step("runEvents.list.limit1", () => callStore("runEvents", "list", { runId: R, limit: 1 }));
await step("runEvents.list.after3", () => callStore("runEvents", "list", { runId: R, afterOffset: "3" }));

const blob = Buffer.from("checkpoint blob \u0000\u0001\u00ff via connect-es", "utf8");
const blobId = createHash("sha256").update(blob).digest("hex");
await step("checkpoints.get.miss", () => callStore("checkpoints", "get", { agentId: A, blobId }));
await step("checkpoints.create", () => callStore("checkpoints", "create", { agentId: A, blobId, data: blob.toString("base64") }));
await step("checkpoints.get", () => callStore("checkpoints", "get", { agentId: A, blobId }));
await step("checkpoints.list", () => callStore("checkpoints", "list", { filter: { agentIds: [A] } }));
out.blob = { blobId, data: blob.toString("base64") };

await step("store.wrongToken", () => callStore("agents", "get", { agentId: A }, storeWrongToken));

// ---- custom tool: the built-in echo returns its arguments unchanged ----
const echoArgs = { text: "ping", nested: { list: [1, 2.5, "drei", null, false, { "ключ": "値 ✓" }] }, empty: {}, n: 1764450000000 };
out.echoArgs = echoArgs;
await step("tool.echo", () => callTool("echo", echoArgs, A, "toolu_connect_es_1"));
await step("tool.echo.noCallId", () => callTool("echo", { text: "no call id" }, A, undefined));
await step("tool.unknown", () => callTool("no_such_tool_" + sfx, {}, A, "toolu_connect_es_2"));
await step("tool.storeToken", () => callTool("echo", echoArgs, A, "toolu_connect_es_3", toolsWithStoreToken));

// ---- clean up what this script stored ----
await step("runEvents.delete", () => callStore("runEvents", "delete", { filter: { runIds: [R] } }));
await step("checkpoints.delete", () => callStore("checkpoints", "delete", { filter: { agentIds: [A] } }));
await step("agents.delete", () => callStore("agents", "delete", { filter: { agentIds: [A, B] } }));
await step("agents.get.deleted", () => callStore("agents", "get", { agentId: A }));

process.stdout.write(JSON.stringify(out) + "\n");
