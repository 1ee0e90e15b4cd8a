"""`Client` and `AsyncClient`: the run API over httpx, with streams that resume by themselves."""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Optional, cast

import httpx

from . import _follow as f
from .schema import (
    ApprovalList,
    ApprovalView,
    Created,
    Forked,
    ForkList,
    RunPage,
    RunState,
    Session,
    SessionPage,
    StreamEvent,
)

# Reads wait at most a minute: the server sends a keepalive every 15 s, so a longer silence
# means a dead connection (then the stream reconnects).
TIMEOUT = httpx.Timeout(connect=10.0, read=60.0, write=30.0, pool=10.0)


def _base(url: str) -> str:
    return url.rstrip("/").removesuffix("/v1")


def _params(**kw: Any) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


def _session_body(model: Optional[str], cwd: Optional[str], tools: Optional[list[str]]) -> dict[str, Any]:
    return _params(model=model, cwd=cwd, tools=tools)


def _decision(decision: str, reason: Optional[str]) -> dict[str, Any]:
    return _params(decision=decision, reason=reason)


def _fork(run_id: str, at: str, name: Optional[str]) -> dict[str, Any]:
    return _params(run_id=run_id, at=at, name=name)


class Client:
    """The run API, blocking. `Client("http://127.0.0.1:7420", token)`; a `with` block closes it."""

    def __init__(self, base_url: str, token: Optional[str] = None, *, http: Optional[httpx.Client] = None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = _base(base_url)
        self._http = http or httpx.Client(timeout=TIMEOUT)
        self._headers = headers

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _call(self, method: str, path: str, body: Any = None, params: Optional[dict[str, Any]] = None) -> Any:
        r = self._http.request(method, self.base_url + path, json=body, params=params, headers=self._headers)
        if r.status_code >= 400:
            raise f.error_of(r.status_code, r.content)
        return r.json() if r.content else None

    def create_session(self, *, model: Optional[str] = None, cwd: Optional[str] = None,
                       tools: Optional[list[str]] = None) -> Created:
        return cast(Created, self._call("POST", "/v1/sessions", _session_body(model, cwd, tools)))

    def get_session(self, session_id: str) -> Session:
        return cast(Session, self._call("GET", f"/v1/sessions/{f.quote(session_id)}"))

    def list_sessions(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> SessionPage:
        return cast(SessionPage, self._call("GET", "/v1/sessions", params=_params(limit=limit, cursor=cursor)))

    def list_runs(self, session_id: str, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> RunPage:
        return cast(RunPage, self._call("GET", f"/v1/sessions/{f.quote(session_id)}/runs",
                                        params=_params(limit=limit, cursor=cursor)))

    def get_run(self, run_id: str) -> RunState:
        return cast(RunState, self._call("GET", f"/v1/runs/{f.quote(run_id)}"))

    def cancel_run(self, run_id: str) -> None:
        self._call("POST", f"/v1/runs/{f.quote(run_id)}/cancel")

    def list_approvals(self, *, state: Optional[str] = None) -> ApprovalList:
        return cast(ApprovalList, self._call("GET", "/v1/approvals", params=_params(state=state)))

    def decide_approval(self, approval_id: str, decision: str, reason: Optional[str] = None) -> ApprovalView:
        return cast(ApprovalView, self._call("POST", f"/v1/approvals/{f.quote(approval_id)}",
                                             _decision(decision, reason)))

    def fork_session(self, session_id: str, run_id: str, at: str = "after", name: Optional[str] = None) -> Forked:
        """A new session whose conversation is the source's `after` or `before` one of its
        finished runs. A retry is a fork `before` the run, then `send_message` on the fork with
        the run's `input["text"]` (or another text)."""
        return cast(Forked, self._call("POST", f"/v1/sessions/{f.quote(session_id)}/fork", _fork(run_id, at, name)))

    def list_session_forks(self, session_id: str) -> ForkList:
        return cast(ForkList, self._call("GET", f"/v1/sessions/{f.quote(session_id)}/forks"))

    def list_run_forks(self, run_id: str) -> ForkList:
        return cast(ForkList, self._call("GET", f"/v1/runs/{f.quote(run_id)}/forks"))

    def follow_run(self, run_id: str, after: Optional[int] = None) -> Iterator[StreamEvent]:
        """The run's events after `after` (all when None) until the terminal one; resumes by
        itself after any drop, `reconnect` or `stream_gap`. Raises `ReplayExpired` on 410."""
        return self._follow(f.Position(run_id, after or 0))

    def send_message(self, session_id: str, text: str) -> Iterator[StreamEvent]:
        """Starts a turn (the message is sent once) and yields its run's events, from
        `run_started` to the terminal `completed` or `error`."""
        return self._follow(f.Position(None, 0, (session_id, text)))

    def _follow(self, pos: f.Position) -> Iterator[StreamEvent]:
        delay = 0.0
        while True:
            if delay > 0:
                time.sleep(delay)
            if pos.lost_post():
                try:
                    run_id = self._find_sent_run(pos.send[0] if pos.send else "", pos.sent_at or 0)
                except httpx.TransportError:
                    run_id = None
                delay = pos.found(run_id)
                continue
            req = pos.request(self._http, self.base_url, self._headers)
            try:
                r = self._http.send(req, stream=True)
            except httpx.TransportError as e:
                if req.method == "POST" and f.refused(e):
                    raise
                delay = pos.failed()
                continue
            try:
                if r.status_code == 204:
                    return
                if r.status_code >= 400:
                    err = f.error_of(r.status_code, r.read())
                    if f.retryable(r.status_code) and req.method != "POST":
                        delay = pos.failed()
                        continue
                    raise err
                parser = pos.connected()
                try:
                    for line in r.iter_lines():
                        block = parser.line(line)
                        ev = pos.accept(block, parser) if block is not None else None
                        if ev is None:
                            continue
                        yield ev
                        if pos.ended:
                            return
                        if ev["type"] == "stream_gap":
                            break
                except httpx.TransportError:
                    pass
                delay = pos.after_stream()
            finally:
                r.close()

    def _find_sent_run(self, session_id: str, sent_at: float) -> Optional[str]:
        session = self.get_session(session_id)
        if session.get("active_run_id"):
            return str(session["active_run_id"])
        runs: list[Any] = []
        cursor: Optional[str] = None
        for _ in range(100):
            page = self.list_runs(session_id, limit=1000, cursor=cursor)
            runs = list(page.get("runs") or runs)
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return f.newest_run_since(runs, sent_at)


class AsyncClient:
    """The run API for asyncio. `AsyncClient("http://127.0.0.1:7420", token)`; an `async with`
    block closes it."""

    def __init__(self, base_url: str, token: Optional[str] = None, *, http: Optional[httpx.AsyncClient] = None):
        self.base_url = _base(base_url)
        self._http = http or httpx.AsyncClient(timeout=TIMEOUT)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, body: Any = None, params: Optional[dict[str, Any]] = None) -> Any:
        r = await self._http.request(method, self.base_url + path, json=body, params=params, headers=self._headers)
        if r.status_code >= 400:
            raise f.error_of(r.status_code, r.content)
        return r.json() if r.content else None

    async def create_session(self, *, model: Optional[str] = None, cwd: Optional[str] = None,
                             tools: Optional[list[str]] = None) -> Created:
        return cast(Created, await self._call("POST", "/v1/sessions", _session_body(model, cwd, tools)))

    async def get_session(self, session_id: str) -> Session:
        return cast(Session, await self._call("GET", f"/v1/sessions/{f.quote(session_id)}"))

    async def list_sessions(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> SessionPage:
        return cast(SessionPage, await self._call("GET", "/v1/sessions", params=_params(limit=limit, cursor=cursor)))

    async def list_runs(self, session_id: str, *, limit: Optional[int] = None,
                        cursor: Optional[str] = None) -> RunPage:
        return cast(RunPage, await self._call("GET", f"/v1/sessions/{f.quote(session_id)}/runs",
                                              params=_params(limit=limit, cursor=cursor)))

    async def get_run(self, run_id: str) -> RunState:
        return cast(RunState, await self._call("GET", f"/v1/runs/{f.quote(run_id)}"))

    async def cancel_run(self, run_id: str) -> None:
        await self._call("POST", f"/v1/runs/{f.quote(run_id)}/cancel")

    async def list_approvals(self, *, state: Optional[str] = None) -> ApprovalList:
        return cast(ApprovalList, await self._call("GET", "/v1/approvals", params=_params(state=state)))

    async def decide_approval(self, approval_id: str, decision: str, reason: Optional[str] = None) -> ApprovalView:
        return cast(ApprovalView, await self._call("POST", f"/v1/approvals/{f.quote(approval_id)}",
                                                   _decision(decision, reason)))

    async def fork_session(self, session_id: str, run_id: str, at: str = "after",
                           name: Optional[str] = None) -> Forked:
        """As `Client.fork_session`."""
        return cast(Forked, await self._call("POST", f"/v1/sessions/{f.quote(session_id)}/fork",
                                             _fork(run_id, at, name)))

    async def list_session_forks(self, session_id: str) -> ForkList:
        return cast(ForkList, await self._call("GET", f"/v1/sessions/{f.quote(session_id)}/forks"))

    async def list_run_forks(self, run_id: str) -> ForkList:
        return cast(ForkList, await self._call("GET", f"/v1/runs/{f.quote(run_id)}/forks"))

    def follow_run(self, run_id: str, after: Optional[int] = None) -> AsyncIterator[StreamEvent]:
        """As `Client.follow_run`, for `async for`."""
        return self._follow(f.Position(run_id, after or 0))

    def send_message(self, session_id: str, text: str) -> AsyncIterator[StreamEvent]:
        """As `Client.send_message`, for `async for`."""
        return self._follow(f.Position(None, 0, (session_id, text)))

    async def _follow(self, pos: f.Position) -> AsyncIterator[StreamEvent]:
        delay = 0.0
        while True:
            if delay > 0:
                await asyncio.sleep(delay)
            if pos.lost_post():
                try:
                    run_id = await self._find_sent_run(pos.send[0] if pos.send else "", pos.sent_at or 0)
                except httpx.TransportError:
                    run_id = None
                delay = pos.found(run_id)
                continue
            req = pos.request(self._http, self.base_url, self._headers)
            try:
                r = await self._http.send(req, stream=True)
            except httpx.TransportError as e:
                if req.method == "POST" and f.refused(e):
                    raise
                delay = pos.failed()
                continue
            try:
                if r.status_code == 204:
                    return
                if r.status_code >= 400:
                    err = f.error_of(r.status_code, await r.aread())
                    if f.retryable(r.status_code) and req.method != "POST":
                        delay = pos.failed()
                        continue
                    raise err
                parser = pos.connected()
                try:
                    async for line in r.aiter_lines():
                        block = parser.line(line)
                        ev = pos.accept(block, parser) if block is not None else None
                        if ev is None:
                            continue
                        yield ev
                        if pos.ended:
                            return
                        if ev["type"] == "stream_gap":
                            break
                except httpx.TransportError:
                    pass
                delay = pos.after_stream()
            finally:
                await r.aclose()

    async def _find_sent_run(self, session_id: str, sent_at: float) -> Optional[str]:
        session = await self.get_session(session_id)
        if session.get("active_run_id"):
            return str(session["active_run_id"])
        runs: list[Any] = []
        cursor: Optional[str] = None
        for _ in range(100):
            page = await self.list_runs(session_id, limit=1000, cursor=cursor)
            runs = list(page.get("runs") or runs)
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return f.newest_run_since(runs, sent_at)
