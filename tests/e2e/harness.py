"""End-to-end harness: starts the fake Cursor backend, callbackd and the real cursor-sdk bridge as
subprocesses (each in its own process group), talks Connect JSON to the bridge, and reads
callbackd's SQLite database for assertions. Standard library only.

Everything listens on 127.0.0.1 with port 0 (the kernel picks a free port; each process reports
the port it got on stderr), so nothing is probed or guessed.
"""
from __future__ import annotations

import http.client
import json
import os
import secrets
import shlex
import signal
import sqlite3
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
E2E_DIR = Path(os.environ.get("CALLBACKD_E2E_DIR") or REPO / "target" / "e2e")


def ci() -> bool:
    """Whether this is a CI run (`CI` set, and not "0" or "false"): a test that cannot run
    here fails instead of skipping (conftest.py turns every skip into a failure)."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


# --------------------------------------------------------------------------------------------
# Environment: NODE, BRIDGE_DIR, FAKEBACKEND_CACHE come from setup.sh (run it when unset).
# --------------------------------------------------------------------------------------------
def load_setup_env() -> dict:
    need = ("NODE", "BRIDGE_DIR", "FAKEBACKEND_CACHE")
    if all(os.environ.get(k) for k in need):
        return {k: os.environ[k] for k in need}
    out = subprocess.run(["bash", str(HERE / "setup.sh")], check=True, stdout=subprocess.PIPE,
                         timeout=600).stdout.decode()
    env = {}
    for line in out.splitlines():
        if line.startswith("export "):
            k, _, v = line[len("export "):].partition("=")
            env[k] = shlex.split(v)[0] if v else ""
    os.environ.update(env)
    return {k: env[k] for k in need}


def callbackd_bin() -> Path:
    p = Path(os.environ.get("CALLBACKD_BIN") or "target/debug/callbackd")
    return p if p.is_absolute() else REPO / p


def rand_token() -> str:
    return secrets.token_hex(16)


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------
class Proc:
    """A subprocess in its own session/process group, stderr (and stdout) in log files."""

    registry: list["Proc"] = []          # every Proc ever started in this pytest session
    adopted: list[int] = []              # pids started by our children in their own groups (killed too)

    def __init__(self, name: str, argv: list[str], logdir: Path, *, env: dict | None = None,
                 cwd: Path | None = None):
        self.name = name
        self.argv = [str(a) for a in argv]
        logdir.mkdir(parents=True, exist_ok=True)
        n = sum(1 for p in Proc.registry if p.name == name and p.err_path.parent == logdir)
        suffix = f".{n}" if n else ""
        self.err_path = logdir / f"{name}{suffix}.err"
        self.out_path = logdir / f"{name}{suffix}.out"
        full_env = dict(os.environ)
        full_env.update(env or {})
        with open(self.err_path, "wb") as err, open(self.out_path, "wb") as out:
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                          env=full_env, cwd=str(cwd) if cwd else None,
                                          start_new_session=True)
        self.pid = self.popen.pid
        self.pgid = self.pid              # start_new_session: pid == pgid == sid
        Proc.registry.append(self)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stderr_text(self) -> str:
        try:
            return self.err_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, n: int = 40) -> str:
        lines = self.stderr_text().splitlines()[-n:]
        return f"--- {self.name} (pid {self.pid}) stderr tail: {self.err_path}\n" + "\n".join(lines)

    def wait_for_line(self, prefix: str, timeout: float = 30.0) -> str:
        """Wait until stderr has a line starting with `prefix`; return the rest of that line."""
        deadline = time.monotonic() + timeout
        while True:
            # Complete lines only: the last one may still be being written.
            for line in self.stderr_text().split("\n")[:-1]:
                if line.startswith(prefix):
                    return line[len(prefix):]
            if not self.alive():
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode} before "
                                   f"printing {prefix!r}\n{self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not print {prefix!r} within {timeout}s\n{self.tail()}")
            time.sleep(0.05)

    def group_alive(self) -> bool:
        try:
            os.killpg(self.pgid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
        """Signal the whole process group, wait for the leader, then SIGKILL what is left."""
        for s in (sig, signal.SIGKILL):
            try:
                os.killpg(self.pgid, s)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout=timeout if s != signal.SIGKILL else 10)
            except subprocess.TimeoutExpired:
                continue
            # the leader is gone; make sure no group member survives it
            deadline = time.monotonic() + 2
            while self.group_alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            if not self.group_alive():
                break
        return self.popen.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


def kill_adopted() -> None:
    """SIGKILL the process groups of adopted pids (e.g. a bridge spawned by `callbackd run`)."""
    for pid in Proc.adopted:
        try:   # only if the pid still is ours (a bridge), never a recycled pid
            if b"cursor-sdk-bridge" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
        except OSError:
            continue
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def pid_alive(pid: int) -> bool:
    """True while `pid` is a live (non-zombie) bridge process."""
    try:
        st = Path(f"/proc/{pid}/stat").read_text()
        if b"cursor-sdk-bridge" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return False
    except OSError:
        return False
    return st.rsplit(")", 1)[-1].split()[0] != "Z"


def live_pids_mentioning(marker: str) -> list[tuple[int, str]]:
    """Processes (other than us) whose command line contains `marker` (e.g. the test tmp root)."""
    found = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            st = (d / "stat").read_text()
        except OSError:
            continue
        state = st.rsplit(")", 1)[-1].split()[0] if ")" in st else "?"
        if state == "Z":
            continue                                  # zombie: already dead, just not reaped
        if marker in cmd:
            found.append((int(d.name), cmd.strip()))
    return found


# --------------------------------------------------------------------------------------------
# Components
# --------------------------------------------------------------------------------------------
class FakeBackend:
    def __init__(self, env: dict, workdir: Path, scenario: str = "auto", extra_env: dict | None = None):
        self.log_path = workdir / "backend.jsonl"
        self.proc = Proc("fakebackend", [env["NODE"], HERE / "fakebackend.mjs", "0", self.log_path, scenario],
                         workdir / "logs", env={"FAKEBACKEND_CACHE": env["FAKEBACKEND_CACHE"], **(extra_env or {})})
        rest = self.proc.wait_for_line("fakebackend listening on ", timeout=60)
        hostport = rest.split()[0]
        self.port = int(hostport.rsplit(":", 1)[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def post_script(self, script: dict) -> dict:
        req = urllib.request.Request(self.url + "/__fake/script", data=json.dumps(script).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def records(self) -> list[dict]:
        try:
            # Complete lines only: the last one may still be being written.
            lines = self.log_path.read_text().split("\n")[:-1]
            return [json.loads(line) for line in lines if line.strip()]
        except FileNotFoundError:
            return []

    def mcp_results(self) -> list[dict]:
        """Every exec_client_message.mcp_result the bridge sent back (one per tool call)."""
        out = []
        for r in self.records():
            m = (r.get("msg") or {}).get("execClientMessage") or {}
            if "mcpResult" in m:
                out.append(m["mcpResult"])
        return out


class Callbackd:
    """callbackd serve on 127.0.0.1:0 with a given database file and env tokens."""

    def __init__(self, workdir: Path, db_path: Path, store_token: str | None = None,
                 tool_token: str | None = None, extra_args: list[str] | None = None):
        self.workdir = workdir
        self.db_path = db_path
        self.store_token = store_token or rand_token()
        self.tool_token = tool_token or rand_token()
        self.extra_args = extra_args or []
        self.proc: Proc | None = None
        self.ready: dict = {}

    def start(self, timeout: float = 30.0) -> "Callbackd":
        binary = callbackd_bin()
        if not binary.exists():
            raise RuntimeError(f"{binary} does not exist; run `cargo build` first (or set CALLBACKD_BIN)")
        self.proc = Proc("callbackd", [binary, "serve", "--listen", "127.0.0.1:0", "--db", self.db_path, *self.extra_args],
                         self.workdir / "logs", cwd=self.workdir,
                         env={"CALLBACKD_STORE_TOKEN": self.store_token, "CALLBACKD_TOOL_TOKEN": self.tool_token,
                              "RUST_BACKTRACE": "1"})
        self.ready = json.loads(self.proc.wait_for_line("callbackd ready ", timeout=timeout))
        self.url = self.ready["url"]
        if not self.url.endswith("/"):
            self.url += "/"
        return self

    @property
    def store_url(self) -> str:
        return self.url

    @property
    def tool_url(self) -> str:
        return self.url

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        return self.proc.stop(sig) if self.proc else None

    def db(self) -> "DB":
        return DB(self.db_path)


class ReferenceServers:
    """Debug stand-in for Callbackd: the fake backend's reference store + tool server.
    Only used when E2E_REFERENCE_DIR points at a folder with logstore.py and toolserver.py
    (never by default); it has no database, so DB assertions do not apply."""

    def __init__(self, workdir: Path, refdir: Path):
        self.workdir, self.refdir = workdir, refdir
        self.store_token, self.tool_token = rand_token(), rand_token()
        self.db_path = None
        self.procs: list[Proc] = []

    def start(self, timeout: float = 30.0):
        sp = Proc("logstore", [sys.executable, self.refdir / "logstore.py", "0", self.workdir / "store.jsonl", self.store_token],
                  self.workdir / "logs")
        tp = Proc("toolserver", [sys.executable, self.refdir / "toolserver.py", "0", self.workdir / "tools.jsonl", self.tool_token],
                  self.workdir / "logs")
        self.procs = [sp, tp]
        self.store_url = "http://127.0.0.1:%s/" % sp.wait_for_line("logstore listening on ").rsplit(":", 1)[1].strip()
        self.tool_url = "http://127.0.0.1:%s/" % tp.wait_for_line("toolserver listening on ").rsplit(":", 1)[1].strip()
        return self

    def stop(self, sig: int = signal.SIGTERM):
        for p in self.procs:
            p.stop(sig)

    def db(self):
        raise RuntimeError("the reference servers have no database")


class Bridge:
    """The real bridge: $NODE $BRIDGE_DIR/dist/bin/cursor-sdk-bridge.js, started directly (the
    bin/cursor-sdk-bridge wrapper does not exec node)."""

    def __init__(self, env: dict, workdir: Path, workspace: Path, backend: FakeBackend, daemon,
                 name: str = "bridge", extra_args: list[str] | None = None):
        self.env, self.workdir, self.workspace = env, workdir, workspace
        self.state = workdir / f"{name}-state"
        tmp = workdir / "tmp"
        for d in (self.state, tmp, workspace):
            d.mkdir(parents=True, exist_ok=True)
        argv = [env["NODE"], Path(env["BRIDGE_DIR"]) / "dist" / "bin" / "cursor-sdk-bridge.js",
                "--host", "127.0.0.1", "--port", "0", "--workspace", workspace, "--state-root", self.state,
                "--local-store", '{"type":"custom"}',
                "--store-callback-url", daemon.store_url, "--store-callback-auth-token", daemon.store_token,
                "--tool-callback-url", daemon.tool_url, "--tool-callback-auth-token", daemon.tool_token,
                "--verbose", *(extra_args or [])]
        self.proc = Proc(name, argv, workdir / "logs", cwd=workspace,
                         env={"CURSOR_BACKEND_URL": backend.url, "CURSOR_API_KEY": "dummy", "TMPDIR": str(tmp)})
        ready = json.loads(self.proc.wait_for_line("cursor-sdk-bridge ready ", timeout=60))
        self.ready = ready
        self.client = BridgeClient(ready["url"], Path(ready["authTokenFile"]).read_text().strip())

    def stop(self, sig: int = signal.SIGTERM):
        return self.proc.stop(sig)


# --------------------------------------------------------------------------------------------
# Connect JSON client for sdk.v1.SdkAgentService
# --------------------------------------------------------------------------------------------
class ConnectError(Exception):
    def __init__(self, method: str, http_status: int, code: str, message: str, raw=None):
        super().__init__(f"{method}: HTTP {http_status} {code}: {message}")
        self.method, self.http_status, self.code, self.message, self.raw = method, http_status, code, message, raw


class CallbackdRun:
    """`callbackd run [...] -- <bridge command>`: callbackd starts its store/tool server, then
    spawns the bridge with the callback flags on argv and relays the bridge's stderr."""

    def __init__(self, env: dict, workdir: Path, workspace: Path, backend: FakeBackend, db_path: Path,
                 store_token: str, tool_token: str, bridge_args: list[str] | None = None,
                 listen: str = "127.0.0.1:0", wait_ready: bool = True, extra_args: list[str] | None = None):
        self.state = workdir / "run-state"
        tmp = workdir / "tmp"
        for d in (self.state, tmp, workspace):
            d.mkdir(parents=True, exist_ok=True)
        n = sum(1 for p in Proc.registry if p.name == "callbackd-run" and p.err_path.parent == workdir / "logs")
        self.ready_file = workdir / f"bridge-ready.{n}.json"
        bridge = [env["NODE"], Path(env["BRIDGE_DIR"]) / "dist" / "bin" / "cursor-sdk-bridge.js",
                  "--host", "127.0.0.1", "--port", "0", "--workspace", workspace, "--state-root", self.state,
                  "--verbose", *(bridge_args or [])]
        argv = [callbackd_bin(), "run", "--listen", listen, "--db", db_path, "--ready-file", self.ready_file,
                *(extra_args or []), "--", *bridge]
        self.proc = Proc("callbackd-run", argv, workdir / "logs", cwd=workspace,
                         env={"CURSOR_BACKEND_URL": backend.url, "CURSOR_API_KEY": "dummy", "TMPDIR": str(tmp),
                              "CALLBACKD_STORE_TOKEN": store_token, "CALLBACKD_TOOL_TOKEN": tool_token,
                              "RUST_BACKTRACE": "1"})
        self.ready: dict = {}
        self.daemon_ready: dict = {}
        if wait_ready:
            self.daemon_ready = json.loads(self.proc.wait_for_line("callbackd ready ", timeout=60))
            self.ready = json.loads(self.proc.wait_for_line("cursor-sdk-bridge ready ", timeout=60))
            self.bridge_pid = int(self.ready["pid"])
            Proc.adopted.append(self.bridge_pid)
            self.client = BridgeClient(self.ready["url"], Path(self.ready["authTokenFile"]).read_text().strip())


class BridgeClient:
    SERVICE = "/sdk.v1.SdkAgentService/"

    def __init__(self, url: str, token: str):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port
        self.headers = {"Authorization": "Bearer " + token, "Connect-Protocol-Version": "1"}

    def call(self, method: str, body: dict | None = None, timeout: float = 60) -> dict:
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            c.request("POST", self.SERVICE + method, json.dumps(body or {}),
                      {"Content-Type": "application/json", **self.headers})
            r = c.getresponse()
            data = r.read()
        finally:
            c.close()
        try:
            obj = json.loads(data or b"{}")
        except ValueError:
            obj = {"code": "unknown", "message": data[:500].decode(errors="replace")}
        if r.status != 200:
            raise ConnectError(method, r.status, obj.get("code", "?"), obj.get("message", ""), obj)
        return obj

    def stream(self, method: str, body: dict, timeout: float = 120) -> list[dict]:
        """Server-streaming call (application/connect+json). Returns every message; raises
        ConnectError when the end-of-stream frame carries an error. `timeout` bounds the whole
        call (the bridge sends keep-alive messages, so a per-read timeout alone never fires)."""
        deadline = time.monotonic() + timeout
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            payload = json.dumps(body).encode()
            c.request("POST", self.SERVICE + method, struct.pack(">BI", 0, len(payload)) + payload,
                      {"Content-Type": "application/connect+json", **self.headers})
            r = c.getresponse()
            if r.status != 200:
                data = r.read()
                try:
                    obj = json.loads(data or b"{}")
                except ValueError:
                    obj = {}
                raise ConnectError(method, r.status, obj.get("code", "?"), obj.get("message", data[:300].decode(errors="replace")))
            msgs = []
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{method} did not finish within {timeout}s; got {len(msgs)} messages: "
                                       f"{json.dumps(msgs)[-1500:]}")
                c.sock.settimeout(left)
                h = r.read(5)
                if len(h) < 5:
                    raise ConnectError(method, 200, "unknown", "stream ended without an end-of-stream frame", msgs)
                flags, n = struct.unpack(">BI", h)
                d = json.loads(r.read(n) or b"{}")
                if flags & 2:
                    if d.get("error"):
                        e = d["error"]
                        raise ConnectError(method, 200, e.get("code", "?"), e.get("message", ""), msgs)
                    return msgs
                msgs.append(d)
        finally:
            c.close()

    # convenience wrappers -------------------------------------------------------------------
    def create_agent(self, cwd: Path | str, name: str | None = None, custom_tools: dict | None = None,
                     agent_id: str | None = None) -> str:
        local: dict = {"cwd": [str(cwd)]}
        if custom_tools:
            local["customTools"] = custom_tools
        opts: dict = {"model": {"id": "composer-2"}, "apiKey": "dummy", "local": local}
        if name:
            opts["name"] = name
        if agent_id:
            opts["agentId"] = agent_id
        return self.call("CreateAgent", {"options": opts})["agentId"]

    def resume_agent(self, agent_id: str, cwd: Path | str, custom_tools: dict | None = None) -> dict:
        local: dict = {"cwd": [str(cwd)]}
        if custom_tools:
            local["customTools"] = custom_tools
        return self.call("ResumeAgent", {"agentId": agent_id,
                                         "options": {"model": {"id": "composer-2"}, "apiKey": "dummy", "local": local}})

    def send(self, agent_id: str, text: str, timeout: float = 60) -> tuple[list[dict], dict]:
        """Send one message; return (stream messages, the RunResult of the `result` message)."""
        msgs = self.stream("Send", {"agentId": agent_id, "message": {"text": text},
                                    "options": {"enableDeltas": True, "enableSteps": True}}, timeout=timeout)
        results = [m["result"] for m in msgs if "result" in m]
        assert results, f"Send stream had no result message: {msgs}"
        return msgs, results[-1]

    def observe(self, run_id: str, after_offset: str | None = None, timeout: float = 60) -> list[dict]:
        body: dict = {"runId": run_id}
        if after_offset is not None:
            body["afterOffset"] = after_offset
        return self.stream("ObserveRun", body, timeout=timeout)

    def list_agents(self, cwd: Path | str | None = None, limit: int | None = None, cursor: str | None = None,
                    include_archived: bool | None = None) -> dict:
        opts: dict = {}
        if cwd is not None:
            opts["cwd"] = str(cwd)
        if limit is not None:
            opts["limit"] = limit
        if cursor:
            opts["cursor"] = cursor
        if include_archived is not None:
            opts["includeArchived"] = include_archived
        return self.call("ListAgents", {"options": opts})

    def list_all_agents(self, cwd: Path | str, limit: int = 1, max_pages: int = 50, **kw) -> tuple[list[dict], int]:
        """Page through ListAgents; return (items, number of pages)."""
        items, cursor, pages = [], None, 0
        while True:
            resp = self.list_agents(cwd=cwd, limit=limit, cursor=cursor, **kw)
            pages += 1
            items += resp.get("items", [])
            cursor = resp.get("nextCursor")
            if not cursor:
                return items, pages
            assert pages < max_pages, f"ListAgents did not stop paging after {pages} pages: {items}"


# --------------------------------------------------------------------------------------------
# callbackd's database, read-only
# --------------------------------------------------------------------------------------------
class DB:
    """Read-only view of callbackd's SQLite database (WAL mode: readers see committed writes
    while the daemon runs). Every table has a `ns` namespace column first."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10)
        self.conn.row_factory = sqlite3.Row

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def query(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        return self.conn.execute(sql, params).fetchall()

    def tables(self) -> list[str]:
        return [r[0] for r in self.query(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]

    def columns(self, table: str) -> list[str]:
        return [r[1] for r in self.query(f'PRAGMA table_info("{table}")')]

    def tables_with(self, column: str) -> list[str]:
        return [t for t in self.tables() if column in self.columns(t)]

    def count(self, table: str, where: str = "1", params: tuple = ()) -> int:
        return self.query(f'SELECT COUNT(*) FROM "{table}" WHERE {where}', params)[0][0]

    def rows_for_agent(self, agent_id: str, run_ids: list[str] = ()) -> dict[str, int]:
        """Rows referring to an agent: every table with an agent_id column, plus every table with
        a run_id column for the given run ids. Returns {table: count} for non-zero counts."""
        out = {}
        for t in self.tables_with("agent_id"):
            n = self.count(t, "agent_id = ?", (agent_id,))
            if n:
                out[t] = n
        for t in self.tables_with("run_id"):
            for rid in run_ids:
                n = self.count(t, "run_id = ?", (rid,))
                if n:
                    out[f"{t}[{rid}]"] = out.get(f"{t}[{rid}]", 0) + n
        return out

    def agent_doc(self, agent_id: str) -> dict | None:
        rows = self.query("SELECT doc FROM agents WHERE agent_id = ?", (agent_id,))
        return json.loads(rows[0]["doc"]) if rows else None

    def run_docs(self, agent_id: str) -> list[dict]:
        return [json.loads(r["doc"]) for r in
                self.query("SELECT doc FROM runs WHERE agent_id = ? ORDER BY turn_number", (agent_id,))]

    def event_seqs(self, run_id: str) -> list[int]:
        return [r[0] for r in self.query("SELECT seq FROM run_events WHERE run_id = ? ORDER BY seq", (run_id,))]

    def blob_ids(self, agent_id: str) -> list[str]:
        return [r[0] for r in self.query("SELECT blob_id FROM checkpoints WHERE agent_id = ? ORDER BY blob_id", (agent_id,))]
