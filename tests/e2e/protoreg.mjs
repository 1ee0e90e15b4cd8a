// Registry of the SDK's own generated protobuf-es (v1) classes, pulled out of the bundled
// webpack module table via the __wreq export that setup.sh adds to its copy of the SDK.
// The copy lives in the setup cache: $FAKEBACKEND_CACHE, else
// ${CALLBACKD_E2E_DIR:-<repo>/target/e2e}/fbcache (the same default as tests/e2e/setup.sh).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
export const cacheDir = process.env.FAKEBACKEND_CACHE ||
  path.join(process.env.CALLBACKD_E2E_DIR || path.join(repoRoot, "target", "e2e"), "fbcache");
const entry = path.join(cacheDir, "sdkcopy", "esm", "index.js");
if (!fs.existsSync(entry)) {
  console.error(`fakebackend: ${entry} not found. Run tests/e2e/setup.sh first, or set FAKEBACKEND_CACHE to its cache dir.`);
  process.exit(2);
}
const { __wreq } = await import(pathToFileURL(entry).href);
export const wreq = __wreq;
export const types = new Map();   // typeName -> message class
export const enums = new Map();   // typeName -> enum object (best effort)
export const services = new Map();
for (const id of Object.keys(__wreq.m)) {
  if (!id.includes("/proto/dist/generated/")) continue;
  let mod;
  try { mod = __wreq(id); } catch (e) { continue; }
  for (const v of Object.values(mod)) {
    if (!v) continue;
    if (typeof v === "function" && typeof v.typeName === "string" && v.fields) types.set(v.typeName, v);
    else if (typeof v === "object" && typeof v.typeName === "string" && v.methods) services.set(v.typeName, v);
  }
}
// Many classes are not exported from their webpack module; discover them through field types.
{
  const queue = [...types.values()];
  while (queue.length) {
    const t = queue.pop();
    let fl; try { fl = t.fields.list(); } catch { continue; }
    for (const f of fl) {
      const cands = [f.kind === "message" ? f.T : null, f.kind === "map" && f.V.kind === "message" ? f.V.T : null];
      for (const c of cands) if (c && c.typeName && !types.has(c.typeName)) { types.set(c.typeName, c); queue.push(c); }
    }
  }
}
export function T(name) { const t = types.get(name); if (!t) throw new Error("no type " + name); return t; }
const KIND = { 1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32", 8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64" };
export function describe(name) {
  const t = T(name);
  const lines = [`message ${name} {`];
  for (const f of t.fields.list()) {
    let ty = f.kind === "scalar" ? KIND[f.T] : f.kind === "enum" ? "enum " + f.T.typeName : f.kind === "message" ? f.T.typeName : f.kind === "map" ? `map<${KIND[f.K]},${f.V.kind === "scalar" ? KIND[f.V.T] : f.V.T.typeName}>` : f.kind;
    lines.push(`  ${f.repeated ? "repeated " : ""}${f.opt ? "optional " : ""}${ty} ${f.name} = ${f.no};${f.oneof ? "  // oneof " + f.oneof.name : ""}`);
  }
  lines.push("}");
  return lines.join("\n");
}
