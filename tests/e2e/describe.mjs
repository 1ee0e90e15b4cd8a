// Schema browser for the SDK's generated protobuf types (needs tests/e2e/setup.sh's cache).
//   node describe.mjs agent.v1.McpArgs ...   fields and field numbers
//   node describe.mjs --list [substr]        type names
//   node describe.mjs --svc [substr]         services and methods
import { describe, types, services } from "./protoreg.mjs";
const args = process.argv.slice(2);
if (args[0] === "--list") { for (const k of [...types.keys()].filter(k => !args[1] || k.includes(args[1])).sort()) console.log(k); }
else if (args[0] === "--svc") { for (const [k, s] of services) if (!args[1] || k.includes(args[1])) { console.log(k); for (const [mk, m] of Object.entries(s.methods)) console.log("  ", m.name, m.I.typeName, "->", m.O.typeName, m.kind); } }
else for (const a of args) console.log(describe(a));
