"""pytest fixtures for callbackd's end-to-end tests.

Every test gets its own stack (fake Cursor backend, callbackd, real bridge) under its tmp_path;
all processes run in their own process groups and are killed at the end of the test that
started them, pass or fail. At the end of the session a finalizer asserts that no process
started by this session is still alive.

Env knobs:
  CALLBACKD_BIN        daemon binary (default target/debug/callbackd, relative to the repo root)
  CALLBACKD_E2E_DIR    where setup.sh put the venv and the fake backend cache (default target/e2e)
  NODE, BRIDGE_DIR, FAKEBACKEND_CACHE   as printed by setup.sh; setup.sh is run when unset
  E2E_REFERENCE_DIR    debug only: a folder with the reference logstore.py/toolserver.py to use
                       instead of callbackd (database assertions are then skipped); refused
                       when CI is set
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import harness as h


def pytest_configure(config):
    # The reference servers skip every database assertion: a debugging aid that must never
    # stand in for callbackd in a CI run.
    if h.ci() and os.environ.get("E2E_REFERENCE_DIR"):
        raise pytest.UsageError("E2E_REFERENCE_DIR is debug only (it skips the database assertions) "
                                "and is refused when CI is set")


@pytest.fixture(scope="session")
def setup_env() -> dict:
    return h.load_setup_env()


# ---- process hygiene -------------------------------------------------------------------------
@pytest.fixture(scope="session", autouse=True)
def no_leftover_processes(tmp_path_factory):
    root = os.path.join(str(tmp_path_factory.getbasetemp()), "")    # trailing "/": pytest-1 is not pytest-12
    yield
    for p in h.Proc.registry:
        p.kill()
    h.kill_adopted()
    alive = [(p.name, p.pid) for p in h.Proc.registry if p.group_alive()]
    alive += [("adopted", pid) for pid in h.Proc.adopted if h.pid_alive(pid)]
    strays = h.live_pids_mentioning(root)
    assert not alive and not strays, f"processes left behind: groups {alive}, by command line {strays}"


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    # Under CI no test skips, whatever its reason: what cannot run there is a failure, so a
    # missing PostgreSQL, Phoenix or browser never turns a run green by leaving tests out.
    if rep.skipped and h.ci() and not hasattr(rep, "wasxfail"):
        why = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else rep.longrepr
        rep.outcome = "failed"
        rep.longrepr = f"skipped under CI, which must run every test: {why}"
    if rep.failed and rep.when in ("setup", "call"):
        start = getattr(item, "_e2e_proc_start", len(h.Proc.registry))
        for p in h.Proc.registry[start:]:
            rep.sections.append((f"{p.name} pid {p.pid}", p.tail(60)))


@pytest.fixture(autouse=True)
def kill_test_processes(request, tmp_path):
    """Stop every process the test started, even when it fails: SIGTERM to each process group
    (so `callbackd run` can stop its bridge), SIGKILL after a grace period, then SIGKILL for
    anything else whose command line names this test's tmp dir (only ours can)."""
    start, start_adopted = len(h.Proc.registry), len(h.Proc.adopted)
    request.node._e2e_proc_start = start
    yield
    for p in reversed(h.Proc.registry[start:]):
        if p.alive() or p.group_alive():
            p.stop(signal.SIGTERM, timeout=5)
    h.kill_adopted()
    for pid, _ in h.live_pids_mentioning(os.path.join(str(tmp_path), "")):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    alive = [(p.name, p.pid) for p in h.Proc.registry[start:] if p.group_alive()]
    alive += [("adopted", pid) for pid in h.Proc.adopted[start_adopted:] if h.pid_alive(pid)]
    assert not alive, f"could not kill {alive}"


# ---- the stack -------------------------------------------------------------------------------
class Stack:
    """Fake backend + store/tool daemon + one bridge, restartable in place (same database)."""

    def __init__(self, env: dict, workdir: Path, scenario: str = "auto", backend_env: dict | None = None):
        self.env, self.workdir = env, workdir
        self.ws1 = workdir / "ws1"
        self.ws2 = workdir / "ws2"
        for d in (self.ws1, self.ws2):
            d.mkdir(parents=True, exist_ok=True)
        self.db_path = workdir / "data" / "callbackd.db"
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self.backend = h.FakeBackend(env, workdir, scenario, backend_env)
        refdir = os.environ.get("E2E_REFERENCE_DIR")
        self.reference = bool(refdir)
        self.daemon = h.ReferenceServers(workdir, Path(refdir)) if refdir else h.Callbackd(workdir, self.db_path)
        self.daemon.start()
        self.bridges = 0
        self.bridge = self._new_bridge()

    def _new_bridge(self) -> h.Bridge:
        self.bridges += 1
        return h.Bridge(self.env, self.workdir, self.ws1, self.backend, self.daemon, name=f"bridge{self.bridges}")

    @property
    def client(self) -> h.BridgeClient:
        return self.bridge.client

    def stop_bridge(self):
        self.bridge.stop(signal.SIGTERM)

    def restart_daemon(self):
        """Stop the daemon (SIGTERM) and start a new one on the same database and tokens."""
        if self.reference:
            return                     # the in-memory reference store would lose everything
        self.daemon.stop(signal.SIGTERM)
        self.daemon = h.Callbackd(self.workdir, self.db_path, self.daemon.store_token, self.daemon.tool_token).start()

    def restart_all(self):
        self.stop_bridge()
        self.restart_daemon()
        self.bridge = self._new_bridge()

    def db(self):
        """`with st.db() as db:` -- callbackd's database, read-only. Against the reference
        servers (debug mode) the block is cut short at its first database access."""
        return _NoDB() if self.reference else h.DB(self.db_path)


class _NoDBAccess(Exception):
    pass


class _NoDB:
    def __enter__(self):
        return self

    def __exit__(self, typ, *_):
        return typ is _NoDBAccess

    def __getattr__(self, name):
        raise _NoDBAccess(name)


@pytest.fixture
def make_stack(setup_env, tmp_path):
    def make(scenario: str = "auto", backend_env: dict | None = None) -> Stack:
        return Stack(setup_env, tmp_path, scenario, backend_env)
    return make
