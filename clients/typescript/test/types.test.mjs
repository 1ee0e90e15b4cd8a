// The README's snippets against the package's types, with the TypeScript compiler: the one
// marked `typecheck` must compile, the one marked `typecheck: must fail` must not, for the
// reason it shows (so the types are real, not `any`). TypeScript comes from `npm ci` here or
// from $CALLBACKD_TS_NODE_MODULES (tests/e2e/setup.sh installs it under target/); without it
// this test fails, it does not skip.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const MODULES = process.env.CALLBACKD_TS_NODE_MODULES || join(ROOT, "node_modules");
const TSC = join(MODULES, "typescript", "bin", "tsc");

function snippet(marker) {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const at = readme.indexOf(`<!-- ${marker} -->`);
  assert.ok(at >= 0, `README.md has no <!-- ${marker} --> block`);
  const m = /```ts\n([\s\S]*?)```/.exec(readme.slice(at));
  assert.ok(m, `no ts block after <!-- ${marker} -->`);
  return m[1];
}

/** Compiles `files` ({name: code}) and the package's declarations in one tsc run (the DOM and
 * Node declarations are the slow part); answers tsc's exit status and its error lines. */
function typecheck(files) {
  assert.ok(existsSync(TSC), `TypeScript is not installed at ${MODULES} (npm ci, or set CALLBACKD_TS_NODE_MODULES)`);
  const dir = mkdtempSync(join(tmpdir(), "callbackd-client-ts-"));
  try {
    for (const [name, code] of Object.entries(files)) writeFileSync(join(dir, name), code);
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        lib: ["ES2022", "DOM", "DOM.Iterable"],
        strict: true,
        noEmit: true,
        typeRoots: [join(MODULES, "@types")],
        types: ["node"],
        paths: { "@callbackd/client": [join(ROOT, "src", "index.d.ts")] },
      },
      files: [...Object.keys(files), join(ROOT, "src", "index.d.ts"), join(ROOT, "src", "openapi.d.ts")],
    }));
    const r = spawnSync(process.execPath, [TSC, "-p", join(dir, "tsconfig.json")], { encoding: "utf8" });
    const out = r.stdout + r.stderr;
    return { status: r.status, out, errors: out.split("\n").filter((l) => l.includes("error TS")) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("the README's switch over StreamEvent type-checks; its snippet reading a missing field does not", () => {
  const r = typecheck({ "good.mts": snippet("typecheck"), "wrong.mts": snippet("typecheck: must fail") });
  // The only error is the wrong snippet's: the good one and the package's declarations compile.
  assert.equal(r.errors.length, 1, r.out);
  assert.match(r.errors[0], /(^|\/)wrong\.mts\(\d+,\d+\): error TS2339: Property 'output' does not exist/, r.out);
  assert.notEqual(r.status, 0);
});

test("a session's status is a union of its four values: a switch over it is exhaustive, a fifth value does not compile", () => {
  const good = `import type { Schema } from "@callbackd/client";
type Session = Schema<"Session">;
export function label(s: Session): string {
  switch (s.status) {
    case "idle": return "waiting for a message";
    case "running": return "working";
    case "error": return "last turn failed";
    case "archived": return "archived";
    case null: case undefined: return "unknown";
    default: { const none: never = s.status; return none; }
  }
}
`;
  const wrong = `import type { Schema } from "@callbackd/client";
export const sleeping = (s: Schema<"Session">): boolean => s.status === "sleeping";
`;
  const r = typecheck({ "status_good.mts": good, "status_wrong.mts": wrong });
  assert.equal(r.errors.length, 1, r.out);
  assert.match(r.errors[0], /(^|\/)status_wrong\.mts\(2,\d+\): error TS2367:/, r.out);
});
