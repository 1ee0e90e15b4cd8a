"""Issue 12, end to end (docs/namespaces.md): one callbackd, three namespaces, three real
bridges, on SQLite and (with CALLBACKD_TEST_PG_URL) on PostgreSQL.

- `a`: its bridge is supervised by `callbackd run --namespace a`; inline tokens.
- `b`: its bridge is started from `callbackd bridge-args --namespace b --format json` and named
  in b's `[namespaces.bridge]`; its tokens come from an env var and from files.
- `c`: like b, with `tools = ["echo"]`.
- `default` has its own tokens ([auth]/[api]) and no bridge.

a and b run turns in parallel through the run API; then each lists and follows only its own
sessions and runs; requests with a's (and default's) tokens for b's ids, on the run API and on
the store and tool callbacks, answer exactly as for ids that do not exist and leave b's data
byte-identical (its database rows, on PostgreSQL read from a `copy-store` into a scratch SQLite
file; its `export --namespace b`; its run API and store views); the
same ids in a and b stay apart; and c's allowlist makes `memory` not_found for c.

One stack per backend (module fixture), shared by the tests below in file order: the listing
test runs before the tests that add sessions or data.
"""
from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import harness as h

STORE_SVC = "/sdk.v1.SdkStoreCallbackService/CallStore"
TOOL_SVC = "/sdk.v1.SdkCustomToolCallbackService/CallCustomTool"
SLOW_SECS = 1.5
CONFIG_TAIL = f"""
[[tools.command]]
name = "slow"
description = "Sleeps, then answers"
argv = ["sh", "-c", "sleep {SLOW_SECS}; echo '{{\\"slept\\": true}}'"]
timeout_ms = 30000
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def other_id(real: str) -> str:
    """An id of the same shape as `real` that nothing has: its last 8 hex digits replaced."""
    while True:
        cand = re.sub(r"[0-9a-f]{8}$", secrets.token_hex(4), real)
        if cand == real:                       # no hex tail: append one
            cand = real + "-" + secrets.token_hex(4)
        if cand != real:
            return cand


def unstamped(raw: bytes) -> bytes:
    """An answer without its write time (`createdAt` of an appended event)."""
    return re.sub(rb'"createdAt":\s*[0-9.e+]+', b'"createdAt":0', raw)


def same_answer(got: tuple, missing: tuple, real_id: str, missing_id: str, what: str):
    """`got` (for another namespace's id) is exactly the answer for an id that does not exist
    (`missing`): same status, same bytes once the ids are swapped."""
    gs, gb = got[0], got[1].decode(errors="replace")
    ms, mb = missing[0], missing[1].decode(errors="replace")
    assert (gs, gb.replace(real_id, "<ID>")) == (ms, mb.replace(missing_id, "<ID>")), \
        f"{what}: another namespace's id answers differently from a missing one:\n" \
        f"  theirs : {gs} {gb[:600]}\n  missing: {ms} {mb[:600]}"


# --------------------------------------------------------------------------------------------
# HTTP: the run API (bearer JSON + SSE) and the two Connect JSON callback services
# --------------------------------------------------------------------------------------------
class Http:
    def __init__(self, url: str, token: str):
        u = url.split("//", 1)[1].split("/", 1)[0]
        host, port = u.rsplit(":", 1)
        self.host, self.port, self.token = host, int(port), token

    def _conn(self, timeout=60):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def raw(self, method: str, path: str, body=None, headers: dict | None = None) -> tuple[int, bytes]:
        c = self._conn()
        try:
            c.request(method, path, None if body is None else json.dumps(body),
                      {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
                       **(headers or {})})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def json(self, method: str, path: str, body=None) -> tuple[int, dict]:
        status, raw = self.raw(method, path, body)
        return status, (json.loads(raw) if raw else {})

    def open(self, method: str, path: str, body=None):
        c = self._conn()
        c.request(method, path, None if body is None else json.dumps(body),
                  {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        return c, c.getresponse()

    # Connect JSON (what the bridge sends) ---------------------------------------------------
    def store(self, substore: str, method: str, inp: dict) -> tuple[int, bytes]:
        return self.raw("POST", STORE_SVC, {"substore": substore, "method": method, "input": inp},
                        {"Connect-Protocol-Version": "1"})

    def store_ok(self, substore: str, method: str, inp: dict):
        status, raw = self.store(substore, method, inp)
        assert status == 200, f"{substore}.{method}: {status} {raw[:500]!r}"
        return json.loads(raw or b"{}").get("output")

    def tool(self, name: str, args: dict, agent_id: str, call_id: str | None = None) -> tuple[int, bytes]:
        body = {"toolName": name, "args": args, "agentId": agent_id}
        if call_id:
            body["toolCallId"] = call_id
        return self.raw("POST", TOOL_SVC, body, {"Connect-Protocol-Version": "1"})

    def tool_ok(self, name: str, args: dict, agent_id: str):
        status, raw = self.tool(name, args, agent_id)
        assert status == 200, f"{name}: {status} {raw[:500]!r}"
        return json.loads(raw or b"{}").get("result")


def frames(resp, limit: float = 60):
    """(kind, id, data) of each SSE block: kind 'event' or 'comment'."""
    deadline = time.monotonic() + limit
    ident, data = None, None
    while time.monotonic() < deadline:
        line = resp.readline()
        if not line:
            return
        line = line.decode().rstrip("\n")
        if line.startswith(":"):
            yield "comment", None, line[1:].strip()
        elif line.startswith("id: "):
            ident = int(line[4:])
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and data is not None:
            yield "event", ident, json.loads(data)
            ident, data = None, None
    raise TimeoutError("stream did not end in time")


def events_of(resp, limit: float = 60) -> list[dict]:
    return [d for kind, _, d in frames(resp, limit) if kind == "event"]


def turn(api: Http, sid: str, text: str) -> dict:
    """One message through the run API, read to its end: {run_id, events, started, ended}."""
    started = time.monotonic()
    c, r = api.open("POST", f"/v1/sessions/{sid}/messages", {"text": text})
    try:
        assert r.status == 200, f"messages: {r.status} {r.read()[:500]!r}"
        evs = events_of(r, limit=90)
    finally:
        c.close()
    return {"run_id": evs[0]["run_id"], "events": evs, "started": started, "ended": time.monotonic()}


# --------------------------------------------------------------------------------------------
# The stack
# --------------------------------------------------------------------------------------------
NAMES = ("a", "b", "c")


def pg_url() -> str:
    url = os.environ.get("CALLBACKD_TEST_PG_URL", "")
    if not url:
        if h.ci():
            pytest.fail("CI must run the PostgreSQL e2e tests: CALLBACKD_TEST_PG_URL is not set")
        pytest.skip("CALLBACKD_TEST_PG_URL is not set")
    return url


class NsStack:
    """Two fake backends (A: bridges a and c; B: bridge b, so b's turns can be scripted alone),
    one daemon (`callbackd run --namespace a`), bridges b and c from `bridge-args`."""

    def __init__(self, env: dict, tmp: Path, backend: str):
        self.env, self.tmp, self.backend_kind = env, tmp, backend
        self.proc_start = len(h.Proc.registry)
        self.ws = tmp / "ws"                      # one workspace path for every bridge
        self.ws.mkdir(parents=True)
        self.db_path = tmp / "data" / "callbackd.db"
        self.db_path.parent.mkdir(parents=True)
        self.tokens = {n: {r: h.rand_token() for r in ("store", "tool", "api")} for n in ("default", *NAMES)}
        secrets_dir = tmp / "secrets"
        secrets_dir.mkdir(mode=0o700)
        for role in ("tool", "api"):              # b's tool and api tokens come from files
            p = secrets_dir / f"b.{role}"
            p.write_text(self.tokens["b"][role] + "\n")
            p.chmod(0o600)
        # b's store token comes from the environment (of the daemon and of bridge-args)
        self.proc_env = {"E2E_NS_B_STORE_TOKEN": self.tokens["b"]["store"], "RUST_BACKTRACE": "1"}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.config = tmp / "callbackd.toml"
        if backend == "postgres":
            self.schema = "e2e_ns_" + secrets.token_hex(6)
            self.store_toml = (f'[store]\nbackend = "postgres"\nurl = "{pg_url()}"\nschema = "{self.schema}"\n'
                               f'path = "{self.db_path}"\n')
        else:
            self.store_toml = f'[store]\npath = "{self.db_path}"\n'
        self.backend_a = h.FakeBackend(env, tmp / "fb-a", "auto")
        self.backend_b = h.FakeBackend(env, tmp / "fb-b", "auto")
        self.write_config(bridges={})
        # b's and c's bridges first (they call the daemon only once agents exist), so their
        # URLs can go in the config the daemon starts with.
        self.bridges: dict[str, dict] = {}
        for name, fb in (("b", self.backend_b), ("c", self.backend_a)):
            self.bridges[name] = self.start_bridge(name, fb)
        self.write_config(bridges={n: b["ready"] for n, b in self.bridges.items()})
        self.start_run()
        self.api = {n: Http(self.url, t["api"]) for n, t in self.tokens.items()}
        self.store = {n: Http(self.url, t["store"]) for n, t in self.tokens.items()}
        self.tools = {n: Http(self.url, t["tool"]) for n, t in self.tokens.items()}

    # config ---------------------------------------------------------------------------------
    def write_config(self, bridges: dict):
        t = self.tokens
        parts = [f'[server]\nlisten = "127.0.0.1:{self.port}"\n', self.store_toml,
                 f'[auth]\nstore_token = "{t["default"]["store"]}"\ntool_token = "{t["default"]["tool"]}"\n',
                 f'[api]\ntoken = "{t["default"]["api"]}"\n', CONFIG_TAIL,
                 f'[[namespaces]]\nname = "a"\nstore_token = "{t["a"]["store"]}"\n'
                 f'tool_token = "{t["a"]["tool"]}"\napi_token = "{t["a"]["api"]}"\n',
                 '[[namespaces]]\nname = "b"\nstore_token_env = "E2E_NS_B_STORE_TOKEN"\n'
                 'tool_token_file = "secrets/b.tool"\napi_token_file = "secrets/b.api"\n',
                 self.bridge_toml(bridges.get("b")),
                 f'[[namespaces]]\nname = "c"\nstore_token = "{t["c"]["store"]}"\n'
                 f'tool_token = "{t["c"]["tool"]}"\napi_token = "{t["c"]["api"]}"\ntools = ["echo"]\n',
                 self.bridge_toml(bridges.get("c"))]
        self.config.write_text("\n".join(parts))

    def bridge_toml(self, ready: dict | None) -> str:
        if not ready:
            return ""
        return (f'[namespaces.bridge]\nurl = "{ready["url"]}"\ntoken_file = "{ready["authTokenFile"]}"\n'
                f'default_cwd = "{self.ws}"\n')

    def callbackd(self, *args, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([str(h.callbackd_bin()), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, cwd=self.tmp, env={**os.environ, **self.proc_env})

    # processes ------------------------------------------------------------------------------
    def bridge_argv(self, name: str, extra: list) -> list:
        state = self.tmp / f"bridge-{name}-state"
        state.mkdir(exist_ok=True)
        return [self.env["NODE"], Path(self.env["BRIDGE_DIR"]) / "dist" / "bin" / "cursor-sdk-bridge.js",
                "--host", "127.0.0.1", "--port", "0", "--workspace", self.ws, "--state-root", state,
                "--verbose", *extra]

    def bridge_env(self, name: str, fb: h.FakeBackend) -> dict:
        tmp = self.tmp / f"tmp-{name}"
        tmp.mkdir(exist_ok=True)
        return {"CURSOR_BACKEND_URL": fb.url, "CURSOR_API_KEY": "dummy", "TMPDIR": str(tmp)}

    def start_bridge(self, name: str, fb: h.FakeBackend) -> dict:
        out = self.callbackd("bridge-args", "--config", self.config, "--namespace", name, "--format", "json")
        assert out.returncode == 0, f"bridge-args --namespace {name}: {out.stderr}"
        args = json.loads(out.stdout)
        self.bridge_args = getattr(self, "bridge_args", {})
        self.bridge_args[name] = args
        flags = []
        for key, value in args.items():   # storeCallbackUrl -> --store-callback-url
            flags += ["--" + re.sub(r"[A-Z]", lambda m: "-" + m.group(0).lower(), key), value]
        proc = h.Proc(f"bridge-{name}", self.bridge_argv(name, flags), self.tmp / "logs", cwd=self.ws,
                      env=self.bridge_env(name, fb))
        ready = json.loads(proc.wait_for_line("cursor-sdk-bridge ready ", timeout=60))
        client = h.BridgeClient(ready["url"], Path(ready["authTokenFile"]).read_text().strip())
        return {"proc": proc, "ready": ready, "client": client, "pid": int(ready["pid"])}

    def start_run(self):
        self.ready_file = self.tmp / "bridge-a-ready.json"
        argv = [h.callbackd_bin(), "run", "--config", self.config, "--namespace", "a",
                "--ready-file", self.ready_file, "--", *self.bridge_argv("a", [])]
        self.run = h.Proc("callbackd-run", argv, self.tmp / "logs", cwd=self.ws,
                          env={**self.bridge_env("a", self.backend_a), **self.proc_env})
        self.daemon_ready = json.loads(self.run.wait_for_line("callbackd ready ", timeout=60))
        ready = json.loads(self.run.wait_for_line("cursor-sdk-bridge ready ", timeout=60))
        # Not in h.Proc.adopted: every test's teardown kills those, and this bridge outlives
        # the test that started it; stop() makes sure it is gone.
        self.bridges["a"] = {"proc": None, "ready": ready, "pid": int(ready["pid"]),
                             "client": h.BridgeClient(ready["url"], Path(ready["authTokenFile"]).read_text().strip())}

    def stop(self):
        stop_procs(self.proc_start)
        pid = self.bridges.get("a", {}).get("pid")
        deadline = time.monotonic() + 5          # `run` stops its bridge; else its watchdog does
        while pid and h.pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid and h.pid_alive(pid):
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    # b's data, as bytes ---------------------------------------------------------------------
    def snapshot(self, ns: str, sessions: list[str]) -> dict:
        """Everything namespace `ns` holds, read without writing anything: its database rows
        (SQLite), `callbackd export --namespace ns`, its run API views, its store views."""
        snap: dict = {}
        api, store = self.api[ns], self.store[ns]
        snap["GET /v1/sessions"] = api.raw("GET", "/v1/sessions?limit=1000")
        runs = []
        for sid in sessions:
            for sub in ("", "/runs?limit=1000"):
                snap[f"GET /v1/sessions/{sid}{sub}"] = api.raw("GET", f"/v1/sessions/{sid}{sub}")
            st, body = api.json("GET", f"/v1/sessions/{sid}/runs?limit=1000")
            runs += [r["run_id"] for r in body.get("runs", [])]
        for rid in runs:
            snap[f"GET /v1/runs/{rid}"] = api.raw("GET", f"/v1/runs/{rid}")
            snap[f"GET /v1/runs/{rid}/events"] = api.raw("GET", f"/v1/runs/{rid}/events?limit=1000")
        snap["agents.list"] = store.store("agents", "list", {"filter": {"limit": 1000}})
        snap["runs.list"] = store.store("runs", "list", {"filter": {"limit": 1000}})
        snap["checkpoints.list"] = store.store("checkpoints", "list", {"filter": {"limit": 1000}})
        for rid in runs:
            snap[f"runEvents.list {rid}"] = store.store("runEvents", "list", {"runId": rid, "limit": 1000})
        blobs = json.loads(snap["checkpoints.list"][1] or b"{}").get("output", {}).get("items", [])
        for sid in sessions:
            for blob in blobs:
                snap[f"checkpoints.get {sid} {blob}"] = store.store("checkpoints", "get", {"agentId": sid, "blobId": blob})
        # The rows: SQLite's own file, or PostgreSQL's tables copied into a scratch SQLite file
        # (`export` reads SQLite only).
        scratch = self.tmp / f"snap-{ns}-{secrets.token_hex(4)}"
        scratch.mkdir()
        db = self.db_path
        if self.backend_kind == "postgres":
            db = scratch / "copy.db"
            cp = self.callbackd("copy-store", "--from", pg_url(), "--from-schema", self.schema, "--to", db)
            assert cp.returncode == 0, f"copy-store: {cp.stderr}"
        exp = self.callbackd("export", "--db", db, "--namespace", ns, scratch / "export")
        assert exp.returncode == 0, f"export --namespace {ns}: {exp.stderr}"
        snap["export"] = {p.name: p.read_bytes() for p in sorted((scratch / "export").iterdir())}
        with h.DB(db) as d:
            for t in d.tables_with("ns"):
                order = ", ".join(str(i) for i in range(1, len(d.columns(t)) + 1))
                snap[f"rows {t}"] = [tuple(r) for r in d.query(f'SELECT * FROM "{t}" WHERE ns = ? ORDER BY {order}', (ns,))]
        shutil.rmtree(scratch)
        return snap

    def stable_snapshot(self, ns: str, sessions: list[str], timeout: float = 15) -> dict:
        """A snapshot that two reads in a row agree on (the bridge updates documents a few ms
        after a run's stream ends)."""
        deadline = time.monotonic() + timeout
        prev = self.snapshot(ns, sessions)
        while True:
            time.sleep(0.2)
            cur = self.snapshot(ns, sessions)
            if cur == prev:
                return cur
            assert time.monotonic() < deadline, f"namespace {ns}'s data did not settle: {diff(prev, cur)}"
            prev = cur


def stop_procs(start: int):
    for p in reversed(h.Proc.registry[start:]):
        if p.alive() or p.group_alive():
            p.stop(signal.SIGTERM, timeout=10)


def diff(before: dict, after: dict) -> str:
    keys = sorted(set(before) | set(after))
    return "\n".join(f"  {k}:\n    before {str(before.get(k))[:400]}\n    after  {str(after.get(k))[:400]}"
                     for k in keys if before.get(k) != after.get(k)) or "(no difference)"


def wait_settled(st: NsStack, ns: str, sid: str, run_ids: list[str], timeout: float = 15):
    """Until the bridge has marked every run ended and the agent idle, in the store."""
    deadline = time.monotonic() + timeout
    while True:
        runs = [st.store[ns].store_ok("runs", "get", {"agentId": sid, "runId": r}) for r in run_ids]
        agent = st.store[ns].store_ok("agents", "get", {"agentId": sid})
        if all(r and r.get("status") not in ("running", "pending", None) for r in runs) and \
                agent and not agent.get("activeRunId"):
            return
        assert time.monotonic() < deadline, f"{ns}'s runs did not settle: {runs} {agent}"
        time.sleep(0.05)


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def ns(request, setup_env, tmp_path_factory):
    """The stack, with a's and b's parallel turns done (their outcome is checked by the first
    test; the others only need the ids)."""
    if request.param == "postgres":
        pg_url()
    t0, start = time.monotonic(), len(h.Proc.registry)
    try:
        st = NsStack(setup_env, tmp_path_factory.mktemp(f"ns-{request.param}"), request.param)
    except BaseException:
        stop_procs(start)      # a bridge `run` started is stopped by `run` (or its watchdog)
        raise
    try:
        st.created, st.sessions, st.turns, st.errors = {}, {}, {}, {}
        for n in ("a", "b"):
            status, body = st.api[n].json("POST", "/v1/sessions", {})
            st.created[n] = (status, body)
            st.sessions[n] = body.get("session", {}).get("session_id")
        barrier = threading.Barrier(2)

        def two_turns(n):
            barrier.wait(timeout=30)
            return [turn(st.api[n], st.sessions[n], f"{n}, turn {i}: please call the echo tool") for i in (1, 2)]

        if all(st.sessions.values()):
            with ThreadPoolExecutor(2) as pool:
                futs = {n: pool.submit(two_turns, n) for n in ("a", "b")}
                for n, f in futs.items():
                    try:
                        st.turns[n] = f.result(timeout=180)
                    except Exception as e:          # reported by the first test
                        st.errors[n] = e
            for n, ts in st.turns.items():
                wait_settled(st, n, st.sessions[n], [t["run_id"] for t in ts])
        st.setup_secs = time.monotonic() - t0
        yield st
    finally:
        st.stop()


@pytest.fixture(autouse=True)
def _logs_of_the_stack(request, kill_test_processes, ns):
    """Attach the module stack's logs to a failing test's report (conftest attaches only the
    processes a test started itself)."""
    request.node._e2e_proc_start = ns.proc_start
    yield


def run_ids(st: NsStack, n: str) -> list[str]:
    return [t["run_id"] for t in st.turns.get(n, [])]


# --------------------------------------------------------------------------------------------
# 1. Two bridges, two namespaces, turns in parallel
# --------------------------------------------------------------------------------------------
def test_two_bridges_in_two_namespaces_run_turns_in_parallel(ns):
    st = ns
    # Wiring: `run --namespace a` gave its bridge a's tokens; bridge-args b's and c's.
    argv = [x.decode() for x in Path(f"/proc/{st.bridges['a']['pid']}/cmdline").read_bytes().split(b"\0")]
    assert argv[argv.index("--store-callback-auth-token") + 1] == st.tokens["a"]["store"], argv
    assert argv[argv.index("--tool-callback-auth-token") + 1] == st.tokens["a"]["tool"], argv
    for n in ("b", "c"):
        args = st.bridge_args[n]
        assert args["storeCallbackAuthToken"] == st.tokens[n]["store"], args
        assert args["toolCallbackAuthToken"] == st.tokens[n]["tool"], args
        assert args["storeCallbackUrl"].rstrip("/") == st.daemon_ready["url"].rstrip("/"), (args, st.daemon_ready)
    # `run --namespace a`'s ready line names a and opens the console with a's API token.
    assert st.daemon_ready.get("namespace") == "a", st.daemon_ready
    # ... in its 0600 runtime file; the log line carries no token.
    assert "#token=" not in st.daemon_ready["console_url"], st.daemon_ready
    runtime = json.loads(Path(st.daemon_ready["runtime_file"]).read_text())
    assert runtime["namespace"] == "a", runtime
    assert runtime["console_url"].endswith("#token=" + st.tokens["a"]["api"]), runtime
    for n in ("default", *NAMES):
        status, who = st.api[n].json("GET", "/v1/whoami")
        assert status == 200 and who["namespace"] == n, (n, status, who)
    # Sessions were created on each namespace's own bridge (b's is the one bridge-args wired).
    for n in ("a", "b"):
        status, body = st.created[n]
        assert status == 201, (n, body)
    creates = {n: st.bridges[n]["proc"].stderr_text().count("SdkAgentService/CreateAgent ok") for n in ("b", "c")}
    assert creates == {"b": 1, "c": 0}, creates
    assert not st.errors, f"turns failed: {st.errors!r}"
    for n in ("a", "b"):
        assert len(st.turns[n]) == 2
        for t in st.turns[n]:
            types = [e["type"] for e in t["events"]]
            assert types[-1] == "completed" and t["events"][-1]["status"] == "finished", (n, types)
            tool = [e for e in t["events"] if e["type"] == "tool_completed"]
            assert [(e["tool"], e["outcome"]) for e in tool] == [("echo", "ok")], (n, tool)
            assert {e["run_id"] for e in t["events"]} == {t["run_id"]}
    # The turns overlapped in time, and each bridge's backend played its own namespace's turns.
    a0, a1 = st.turns["a"][0]["started"], st.turns["a"][-1]["ended"]
    b0, b1 = st.turns["b"][0]["started"], st.turns["b"][-1]["ended"]
    assert max(a0, b0) < min(a1, b1), "a's and b's turns did not overlap"
    for fb, n in ((st.backend_a, "a"), (st.backend_b, "b")):
        scripts = [r for r in fb.records() if r.get("ev") == "script"]
        assert [s["priorTurns"] for s in scripts] == [0, 1], (n, scripts)
    # Each run is its namespace's, in its namespace's store.
    for n in ("a", "b"):
        for rid in run_ids(st, n):
            status, run = st.api[n].json("GET", f"/v1/runs/{rid}")
            assert status == 200 and run["status"] == "finished" and run["session_id"] == st.sessions[n], run
            assert [(c["tool"], c["outcome"]) for c in run["tool_calls"]] == [("echo", "ok")], run
    # The store calls of each namespace are counted under its own label.
    status, metrics = st.api["default"].raw("GET", "/metrics")
    assert status == 200, metrics[:300]
    for n in ("a", "b"):
        assert [line for line in metrics.decode().splitlines()
                if line.startswith("callbackd_store_call_duration_seconds_count{") and f'namespace="{n}"' in line
                and 'call="runEvents.append"' in line], f"no runEvents.append count for namespace {n} in /metrics"
    print(f"\n[{st.backend_kind}] stack up + 2x2 parallel turns: {st.setup_secs:.1f}s")


# --------------------------------------------------------------------------------------------
# 2. Each namespace lists only its own sessions and follows only its own runs
# --------------------------------------------------------------------------------------------
def test_each_namespace_lists_and_follows_only_its_own(ns):
    st = ns
    expect = {"a": [st.sessions["a"]], "b": [st.sessions["b"]], "c": [], "default": []}
    for n, sids in expect.items():
        status, page = st.api[n].json("GET", "/v1/sessions")
        assert status == 200 and [s["session_id"] for s in page["sessions"]] == sids, (n, page)
    # Through each bridge's own Connect API too: one workspace path, each sees its own agents.
    for n in NAMES:
        items = st.bridges[n]["client"].list_agents(st.ws).get("items", [])
        assert [x["agentId"] for x in items] == expect[n], (n, items)
    # The store callback lists the same.
    for n, sids in expect.items():
        out = st.store[n].store_ok("agents", "list", {"filter": {}})
        assert [x["agentId"] for x in (out or {}).get("items", [])] == sids, (n, out)
    # Each follows its own runs; the other's token gets the answer of a run that does not exist.
    for me, other in (("a", "b"), ("b", "a")):
        for rid in run_ids(st, me):
            c, r = st.api[me].open("GET", f"/v1/runs/{rid}/stream")
            evs = events_of(r)
            c.close()
            assert r.status == 200 and evs[-1]["type"] == "completed" and evs[-1]["run_id"] == rid, evs[-3:]
            missing = other_id(rid)
            got = st.api[other].raw("GET", f"/v1/runs/{rid}/stream")
            assert got[0] == 404, got
            same_answer(got, st.api[other].raw("GET", f"/v1/runs/{missing}/stream"), rid, missing,
                        f"{other}'s token on {me}'s stream")
        sid = st.sessions[me]
        status, runs = st.api[me].json("GET", f"/v1/sessions/{sid}/runs")
        assert [r["run_id"] for r in runs["runs"]] == run_ids(st, me), runs


# --------------------------------------------------------------------------------------------
# 3. Forged requests: other namespaces' tokens, b's ids
# --------------------------------------------------------------------------------------------
def forged_run_api(api: Http, sid: str, rid: str) -> list[tuple]:
    """(what, answer for the given id, answer for a missing one, the id, the missing id) of
    every run API route that takes a session or run id."""
    msid, mrid = other_id(sid), other_id(rid)
    out = []
    for method, path, body in (("GET", "/v1/sessions/{s}", None), ("GET", "/v1/sessions/{s}/runs", None),
                               ("POST", "/v1/sessions/{s}/messages", {"text": "hijack: call the echo tool"}),
                               ("GET", "/v1/runs/{r}", None), ("GET", "/v1/runs/{r}/events", None),
                               ("GET", "/v1/runs/{r}/stream", None), ("GET", "/v1/runs/{r}/stream?after=1", None),
                               ("POST", "/v1/runs/{r}/cancel", None)):
        real = path.format(s=sid, r=rid)
        miss = path.format(s=msid, r=mrid)
        out.append((f"{method} {real}", api.raw(method, real, body), api.raw(method, miss, body),
                    sid if "{s}" in path else rid, msid if "{s}" in path else mrid))
    return out


def test_forged_run_api_requests_find_nothing_and_change_nothing(ns):
    st = ns
    sid, rids = st.sessions["b"], run_ids(st, "b")
    before = st.stable_snapshot("b", [sid])
    scripts = {fb: len([r for r in fb.records() if r.get("ev") == "script"]) for fb in (st.backend_a, st.backend_b)}
    for forger in ("a", "default"):
        for rid in rids:
            for what, got, missing, real_id, missing_id in forged_run_api(st.api[forger], sid, rid):
                assert got[0] == 404, f"{forger}: {what}: {got[0]} {got[1][:300]!r}"
                same_answer(got, missing, real_id, missing_id, f"{forger}: {what}")
        status, page = st.api[forger].json("GET", "/v1/sessions")
        assert sid not in [s["session_id"] for s in page["sessions"]], page
    after = st.snapshot("b", [sid])
    assert after == before, f"b's data changed:\n{diff(before, after)}"
    # No bridge ran a turn for the forged messages.
    for fb, n in scripts.items():
        assert len([r for r in fb.records() if r.get("ev") == "script"]) == n


def test_forged_requests_on_a_live_run_of_b(ns):
    """While b's run waits on a slow tool: a's token can neither follow, read, cancel nor
    message it (404, as for a missing id), and b's run finishes; b itself follows it live."""
    st = ns
    sid = st.sessions["b"]
    st.backend_b.post_script({"steps": [{"text": "Calling slow."}, {"tool": "slow", "args": {}},
                                        {"textFromLastTool": "slow said: "}]})
    c, r = st.api["b"].open("POST", f"/v1/sessions/{sid}/messages", {"text": "call slow"})
    assert r.status == 200, r.read()
    rid, seen = None, []
    for kind, i, d in frames(r):
        if kind == "event":
            rid = d["run_id"]
            seen.append(d)
            if d["type"] == "tool_started":
                break
    assert rid and seen[-1]["type"] == "tool_started", seen
    # b follows its live run on a second stream
    follow = {}
    def follow_b():
        fc, fr = st.api["b"].open("GET", f"/v1/runs/{rid}/stream")
        follow["status"], follow["events"] = fr.status, events_of(fr)
        fc.close()
    t = threading.Thread(target=follow_b)
    t.start()
    for what, got, missing, real_id, missing_id in forged_run_api(st.api["a"], sid, rid):
        assert got[0] == 404, f"{what} of b's live run with a's token: {got[0]} {got[1][:300]!r}"
        same_answer(got, missing, real_id, missing_id, f"a: {what} (live run)")
    # the forged requests (cancel included) met a live run: b's tool still runs
    status, run = st.api["b"].json("GET", f"/v1/runs/{rid}")
    assert status == 200 and run["status"] == "running", run
    rest = events_of(r)
    c.close()
    t.join(timeout=60)
    assert not t.is_alive(), "b's second stream never ended"
    assert rest[-1]["type"] == "completed" and rest[-1]["status"] == "finished", \
        f"b's run did not finish after a's forged cancel: {rest[-3:]}"
    assert follow["status"] == 200 and follow["events"][-1]["type"] == "completed", follow
    tool_done = [e for e in rest if e["type"] == "tool_completed"]
    assert tool_done and tool_done[0]["tool"] == "slow" and tool_done[0]["outcome"] == "ok", rest
    wait_settled(st, "b", sid, [rid])


def test_forged_store_and_tool_calls_find_nothing_and_change_nothing(ns):
    st = ns
    sid = st.sessions["b"]
    b_runs = [x["runId"] for x in st.store["b"].store_ok("runs", "list", {"filter": {"agentIds": [sid]}})["items"]]
    rid = b_runs[0]
    b_agent = st.store["b"].store_ok("agents", "get", {"agentId": sid})
    b_run = st.store["b"].store_ok("runs", "get", {"agentId": sid, "runId": rid})
    blob = b_agent["latestCheckpoint"]["rootBlobId"]
    assert st.store["b"].store_ok("checkpoints", "get", {"agentId": sid, "blobId": blob})["found"] is True
    # b keeps a note for its agent (its own tool token) before the snapshot
    note = {"action": "set", "key": "plan", "value": "b's secret plan"}
    assert st.tools["b"].tool_ok("memory", note, sid) is not None
    before = st.stable_snapshot("b", [sid])

    for forger in ("a", "default"):
        s, t = st.store[forger], st.tools[forger]
        msid, mrid = other_id(sid), other_id(rid)
        mblob = hashlib.sha256(secrets.token_bytes(16)).hexdigest()
        sub = lambda v, real, miss: json.loads(json.dumps(v).replace(real, miss))

        def check(what, substore, method, inp, real_ids=(sid, rid, blob)):
            missing_inp = inp
            for real, miss in zip(real_ids, (msid, mrid, mblob)):
                missing_inp = sub(missing_inp, real, miss)
            got, missing = s.store(substore, method, inp), s.store(substore, method, missing_inp)
            got_n = got[0], unstamped(got[1]).replace(sid.encode(), b"<S>").replace(rid.encode(), b"<R>") \
                .replace(blob.encode(), b"<B>")
            mis_n = missing[0], unstamped(missing[1]).replace(msid.encode(), b"<S>").replace(mrid.encode(), b"<R>") \
                .replace(mblob.encode(), b"<B>")
            assert got_n == mis_n, f"{forger}: {what}: b's ids answer differently from missing ones:\n" \
                                   f"  theirs : {got[0]} {got[1][:500]!r}\n  missing: {missing[0]} {missing[1][:500]!r}"
            return got

        # reads
        check("agents.get", "agents", "get", {"agentId": sid})
        check("runs.get", "runs", "get", {"agentId": sid, "runId": rid})
        check("runs.list", "runs", "list", {"filter": {"agentIds": [sid]}})
        check("runs.list by run id", "runs", "list", {"filter": {"runIds": [rid]}})
        check("runEvents.list", "runEvents", "list", {"runId": rid})
        check("checkpoints.get", "checkpoints", "get", {"agentId": sid, "blobId": blob})
        check("checkpoints.list", "checkpoints", "list", {"filter": {"agentIds": [sid]}})
        listed = s.store_ok("agents", "list", {"filter": {"cwd": str(st.ws)}}) or {}
        assert sid not in [x["agentId"] for x in listed.get("items", [])], listed
        # writes to b's documents
        check("agents.update", "agents", "update", {"agent": {**b_agent, "name": "hijacked"}})
        check("runs.update", "runs", "update", {"run": {**b_run, "status": "error"}})
        data = base64.b64encode(b"forged").decode()
        check("checkpoints.update", "checkpoints", "update", {"agentId": sid, "blobId": blob, "data": data})
        # deletes of b's ids
        check("agents.delete", "agents", "delete", {"filter": {"agentIds": [sid]}})
        check("agents.delete by cwd", "agents", "delete", {"filter": {"agentIds": [sid], "cwd": b_agent["cwd"]}})
        check("runs.delete", "runs", "delete", {"filter": {"runIds": [rid]}})
        check("runs.delete by agent", "runs", "delete", {"filter": {"agentIds": [sid]}})
        check("runEvents.delete", "runEvents", "delete", {"filter": {"runIds": [rid]}})
        check("checkpoints.delete", "checkpoints", "delete", {"filter": {"agentIds": [sid]}})
        check("checkpoints.delete by blob", "checkpoints", "delete", {"filter": {"blobIds": [blob]}})
        # an append to b's run id lands in the forger's own namespace, as a first event
        got = check("runEvents.append", "runEvents", "append",
                    {"runId": rid, "eventType": "forged", "payload": {"x": 1}})
        assert json.loads(got[1])["output"]["seq"] == 1, got
        for r_ in (rid, mrid):
            s.store_ok("runEvents", "delete", {"filter": {"runIds": [r_]}})
        # tools with b's agent id: the forger's own (empty) notebook, its own tool call records
        for args in ({"action": "get", "key": "plan"}, {"action": "list"}):
            got, missing = t.tool("memory", args, sid), t.tool("memory", args, msid)
            assert got == missing, f"{forger}: memory {args['action']} for b's agent: {got} vs {missing}"
            assert json.loads(got[1])["result"].get("found") in (None, False), got
        assert t.tool_ok("memory", {"action": "set", "key": "plan", "value": "forged"}, sid) is not None
        assert t.tool_ok("memory", {"action": "delete", "key": "plan"}, sid) is not None
        assert t.tool_ok("echo", {"text": "forged"}, sid) == {"text": "forged"}

    after = st.snapshot("b", [sid])
    assert after == before, f"b's data changed:\n{diff(before, after)}"
    # b's note is still b's (read last: the read is a tool call, which b's records keep)
    got = st.tools["b"].tool_ok("memory", {"action": "get", "key": "plan"}, sid)
    assert got.get("found") is True and got.get("value") == "b's secret plan", got


# --------------------------------------------------------------------------------------------
# 4. Equal ids in two namespaces stay apart
# --------------------------------------------------------------------------------------------
def test_equal_ids_in_two_namespaces_stay_apart(ns):
    st = ns
    aid, rid = f"agent-twin-{secrets.token_hex(4)}", f"run-twin-{secrets.token_hex(4)}"
    blob = b"the same blob in two namespaces"
    blob_id = hashlib.sha256(blob).hexdigest()
    docs = {n: {"agentId": aid, "cwd": str(st.ws), "status": "idle", "activeRunId": None, "name": f"twin in {n}",
                "createdAt": 1764450000000, "updatedAt": 1764450000000 + i, "latestCheckpoint": None}
            for i, n in enumerate(("a", "b"))}
    runs = {n: {"runId": rid, "agentId": aid, "turnNumber": 1, "status": "finished", "note": f"run of {n}"}
            for n in ("a", "b")}
    for n in ("a", "b"):
        s = st.store[n]
        assert s.store_ok("agents", "create", {"agent": docs[n]}) == docs[n], n
        assert s.store_ok("runs", "create", {"run": runs[n]}) == runs[n], n
        s.store_ok("checkpoints", "create", {"agentId": aid, "blobId": blob_id, "data": base64.b64encode(blob).decode()})
        st.tools[n].tool_ok("memory", {"action": "set", "key": "who", "value": f"note of {n}"}, aid)
    seqs = {n: [st.store[n].store_ok("runEvents", "append", {"runId": rid, "eventType": "e", "payload": {"ns": n, "i": i}})["seq"]
                for i in range(3 if n == "a" else 1)] for n in ("a", "b")}
    assert seqs == {"a": [1, 2, 3], "b": [1]}, seqs

    def views(n):
        s = st.store[n]
        return {"agent": s.store_ok("agents", "get", {"agentId": aid}),
                "run": s.store_ok("runs", "get", {"agentId": aid, "runId": rid}),
                "events": [e["payload"] for e in s.store_ok("runEvents", "list", {"runId": rid})["items"]],
                "blob": (s.store_ok("checkpoints", "get", {"agentId": aid, "blobId": blob_id}) or {}).get("found"),
                "note": st.tools[n].tool_ok("memory", {"action": "get", "key": "who"}, aid).get("value"),
                "session": st.api[n].json("GET", f"/v1/sessions/{aid}")[1].get("name")}

    assert views("a") == {"agent": docs["a"], "run": runs["a"], "events": [{"ns": "a", "i": i} for i in range(3)],
                          "blob": True, "note": "note of a", "session": "twin in a"}
    b_view = views("b")
    assert b_view == {"agent": docs["b"], "run": runs["b"], "events": [{"ns": "b", "i": 0}],
                      "blob": True, "note": "note of b", "session": "twin in b"}
    # Deleting the agent in a (the bridge's delete: every substore) leaves b's twin whole.
    s = st.store["a"]
    s.store_ok("runEvents", "delete", {"filter": {"runIds": [rid]}})
    s.store_ok("checkpoints", "delete", {"filter": {"agentIds": [aid]}})
    s.store_ok("runs", "delete", {"filter": {"agentIds": [aid]}})
    s.store_ok("agents", "delete", {"filter": {"agentIds": [aid]}})
    assert s.store_ok("agents", "get", {"agentId": aid}) is None
    assert s.store_ok("runEvents", "list", {"runId": rid})["items"] == []
    assert st.api["a"].json("GET", f"/v1/sessions/{aid}")[0] == 404
    assert views("b") == b_view
    # and b's delete leaves nothing of the twin behind in b
    s = st.store["b"]
    s.store_ok("runEvents", "delete", {"filter": {"runIds": [rid]}})
    s.store_ok("checkpoints", "delete", {"filter": {"agentIds": [aid]}})
    s.store_ok("runs", "delete", {"filter": {"agentIds": [aid]}})
    s.store_ok("agents", "delete", {"filter": {"agentIds": [aid]}})
    assert s.store_ok("agents", "get", {"agentId": aid}) is None


# --------------------------------------------------------------------------------------------
# 5. Tool allowlist
# --------------------------------------------------------------------------------------------
def test_a_tool_outside_the_allowlist_is_not_found(ns):
    st = ns
    agent = "agent-allowlist-" + secrets.token_hex(4)
    # c (tools = ["echo"]): memory is not_found, with the message of a tool that does not exist
    status, raw = st.tools["c"].tool("memory", {"action": "list"}, agent)
    nstatus, nraw = st.tools["c"].tool("no_such_tool", {"action": "list"}, agent)
    assert status == 404 and json.loads(raw)["code"] == "not_found", (status, raw)
    assert (status, raw.replace(b"memory", b"<T>")) == (nstatus, nraw.replace(b"no_such_tool", b"<T>")), (raw, nraw)
    assert st.tools["c"].tool_ok("echo", {"text": "hi"}, agent) == {"text": "hi"}
    # a (no allowlist) has memory
    assert st.tools["a"].tool_ok("memory", {"action": "list"}, agent) is not None
    # New sessions declare the allowed tools only (c), or every enabled one (a, b).
    asked = st.api["c"].raw("POST", "/v1/sessions", {"tools": ["memory"]})
    unknown = st.api["c"].raw("POST", "/v1/sessions", {"tools": ["no_such_tool"]})
    assert asked[0] == 400, asked
    assert asked[1].replace(b"memory", b"<T>") == unknown[1].replace(b"no_such_tool", b"<T>"), (asked, unknown)
    status, body = st.api["c"].json("POST", "/v1/sessions", {})
    assert status == 201 and body["tools"] == ["echo"], body
    for n in ("a", "b"):
        assert {"echo", "memory", "slow"} <= set(st.created[n][1]["tools"]), st.created[n]
    # c's turn, on c's bridge: the model is offered echo alone, and calls it.
    t = turn(st.api["c"], body["session"]["session_id"], "please call the echo tool")
    assert t["events"][-1]["type"] == "completed" and t["events"][-1]["status"] == "finished", t["events"][-3:]
    assert [(e["tool"], e["outcome"]) for e in t["events"] if e["type"] == "tool_completed"] == [("echo", "ok")]
    offered = [r["tools"] for r in st.backend_a.records() if r.get("ev") == "script"][-1]
    assert offered == ["custom-user-tools-echo"], offered
