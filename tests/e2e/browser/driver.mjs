// A headless Chromium for the Python browser tests, driven over stdin/stdout: one JSON
// command per line in, one JSON answer per line out ({"ok": true, "value": ...} or
// {"ok": false, "error": "..."}). The test (test_console_e2e.py) keeps the scenario; this
// file only knows Playwright.
//
//   node driver.mjs USER_DATA_DIR [WIDTH HEIGHT]
//   {"op": "goto", "url": "..."}                 {"op": "click", "selector": "..."}
//   {"op": "fill", "selector": "...", "text": "..."}   {"op": "press", "selector": "...", "key": "..."}
//   {"op": "key", "key": "Tab"}                  (a key press wherever the focus is)
//   {"op": "wait", "selector": "...", "state"?: "visible"|"attached"|"hidden", "timeout_ms"?: n}
//   {"op": "eval", "js": "() => ..."}            {"op": "screenshot", "path": "...", "full_page"?: bool}
//   {"op": "viewport", "width": n, "height": n}  {"op": "log"}  (console messages and page errors so far)
//   {"op": "close"}
//
// Chromium is Debian's (/usr/bin/chromium, or $CHROMIUM): playwright-core never downloads
// one. The flags keep it off the network: this machine has none, and without them Chromium
// keeps trying (updates, sync, safe browsing) at every start.
import readline from "node:readline";
import { createRequire } from "node:module";

// playwright-core lives where setup.sh installed it (target/), not next to this file.
const deps = process.env.CONSOLE_BROWSER_DIR;
if (!deps) {
  console.error("CONSOLE_BROWSER_DIR is not set: run tests/e2e/browser/setup.sh");
  process.exit(2);
}
const { chromium } = createRequire(`${deps}/`)("playwright-core");

const [userDataDir, width = "1100", height = "800"] = process.argv.slice(2);
if (!userDataDir) {
  console.error("usage: node driver.mjs USER_DATA_DIR [WIDTH HEIGHT]");
  process.exit(2);
}

const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  viewport: { width: Number(width), height: Number(height) },
  args: [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-quic", "--no-first-run", "--disable-default-apps", "--no-default-browser-check",
  ],
});
const page = context.pages()[0] ?? (await context.newPage());
const log = [];
page.on("console", (m) => log.push(`console.${m.type()}: ${m.text()}`));
page.on("pageerror", (e) => log.push(`pageerror: ${e.message}`));
// Anything that leaves 127.0.0.1 is a bug of the console (no CDN, no network): fail it loudly.
await page.route((url) => !["127.0.0.1", "localhost", "[::1]"].includes(url.hostname) && url.protocol !== "data:", (route) => {
  log.push(`blocked request to ${route.request().url()}`);
  return route.abort();
});

const ops = {
  goto: (c) => page.goto(c.url, { waitUntil: "domcontentloaded" }).then(() => page.url()),
  click: (c) => page.click(c.selector, { timeout: c.timeout_ms ?? 10000 }),
  fill: (c) => page.fill(c.selector, c.text, { timeout: c.timeout_ms ?? 10000 }),
  press: (c) => page.press(c.selector, c.key, { timeout: c.timeout_ms ?? 10000 }),
  key: (c) => page.keyboard.press(c.key),
  wait: (c) => page.waitForSelector(c.selector, { state: c.state ?? "visible", timeout: c.timeout_ms ?? 30000 }).then(() => true),
  eval: (c) => page.evaluate(`(${c.js})()`),
  screenshot: (c) => page.screenshot({ path: c.path, fullPage: c.full_page ?? true }).then(() => c.path),
  viewport: (c) => page.setViewportSize({ width: c.width, height: c.height }),
  log: () => log.slice(),
  url: () => page.url(),
};

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (e) {
    process.stdout.write(JSON.stringify({ ok: false, error: `bad command: ${e.message}` }) + "\n");
    continue;
  }
  if (cmd.op === "close") break;
  try {
    const op = ops[cmd.op];
    if (!op) throw new Error(`unknown op ${cmd.op}`);
    const value = await op(cmd);
    process.stdout.write(JSON.stringify({ ok: true, value: value ?? null }) + "\n");
  } catch (e) {
    process.stdout.write(JSON.stringify({ ok: false, error: String(e?.message || e), log }) + "\n");
  }
}
await context.close();
process.stdout.write(JSON.stringify({ ok: true, value: "closed" }) + "\n");
