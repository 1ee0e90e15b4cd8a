"""The resume rules of Client and AsyncClient against a scripted server on 127.0.0.1: the n-th
request gets the n-th answer of the script, so each drop and answer is the one the test means."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from callbackd_client import AsyncClient, CallbackdError, Client, ReplayExpired

RUN = "run-1"
Handler = Callable[[BaseHTTPRequestHandler], None]


def ev(seq: int, kind: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "run_id": RUN, "at": "2026-01-01T00:00:00Z", **extra}


def durable(seq: int, kind: str, **extra: Any) -> str:
    return f"id: {seq}\ndata: {json.dumps(ev(seq, kind, **extra))}\n\n"


def control(seq: int, kind: str, **extra: Any) -> str:
    return f"data: {json.dumps(ev(seq, kind, **extra))}\n\n"


def terminal(seq: int) -> str:
    return durable(seq, "completed", status="finished", usage={}, output="done")


def stream(*blocks: str, cut: str = "") -> Handler:
    """Sends the blocks, then half of `cut` (an event that never ends), then closes."""
    def h(r: BaseHTTPRequestHandler) -> None:
        r.send_response(200)
        r.send_header("Content-Type", "text/event-stream")
        r.end_headers()
        for b in blocks:
            r.wfile.write(b.encode())
        r.wfile.write(cut[: len(cut) // 2].encode())
    return h


def answer(status: int, body: dict[str, Any] | None = None) -> Handler:
    def h(r: BaseHTTPRequestHandler) -> None:
        raw = json.dumps(body).encode() if body is not None else b""
        r.send_response(status)
        r.send_header("Content-Type", "application/json")
        r.send_header("Content-Length", str(len(raw)))
        r.end_headers()
        r.wfile.write(raw)
    return h


class Script:
    def __init__(self, handlers: list[Handler]):
        self.handlers = handlers
        self.requests: list[tuple[str, str, str, float]] = []
        script = self

        class H(BaseHTTPRequestHandler):
            def do_any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                script.requests.append((self.command, self.path, body, time.monotonic()))
                assert self.headers.get("Authorization") == "Bearer tok"
                i = len(script.requests) - 1
                (script.handlers[i] if i < len(script.handlers) else answer(500, {"detail": "no more script"}))(self)

            do_GET = do_POST = do_any

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def urls(self) -> list[str]:
        return [f"{m} {p}" for m, p, _, _ in self.requests]


@pytest.fixture
def script() -> Iterator[Callable[[list[Handler]], Script]]:
    made: list[Script] = []

    def make(handlers: list[Handler]) -> Script:
        made.append(Script(handlers))
        return made[-1]
    yield make
    for s in made:
        s.server.shutdown()
        s.server.server_close()


def seqs(events: list[Any]) -> list[int]:
    return [e["seq"] for e in events if e["type"] not in ("token", "up_to_date", "reconnect", "stream_gap")]


def test_a_cut_stream_resumes_after_the_last_durable_seq_once(script: Callable[[list[Handler]], Script]) -> None:
    s = script([
        stream("retry: 20\n\n", durable(1, "run_started"), control(1, "token", text="a", delta=1), cut=durable(2, "step")),
        stream(durable(1, "run_started"), durable(2, "step"), cut=durable(3, "usage")),  # an overlap: dropped
        stream(durable(3, "usage"), terminal(4), durable(5, "step")),
    ])
    with Client(s.url + "/v1", "tok") as api:
        events = list(api.follow_run(RUN))
    assert seqs(events) == [1, 2, 3, 4] and events[-1]["type"] == "completed"
    assert s.urls() == [f"GET /v1/runs/{RUN}/stream?after={n}" for n in (0, 1, 2)]
    assert s.requests[2][3] - s.requests[1][3] < 1.0   # the server's retry: 20, not the 1 s default


def test_reconnect_waits_its_retry_ms_and_stream_gap_resumes(script: Callable[[list[Handler]], Script]) -> None:
    s = script([
        stream("retry: 10\n\n", durable(1, "run_started"), control(1, "reconnect", after_seq=1, retry_ms=300)),
        stream(durable(2, "step"), control(2, "stream_gap", after_seq=2, reason="missing row")),
        stream(terminal(3)),
    ])
    with Client(s.url, "tok") as api:
        events = list(api.follow_run(RUN))
    assert [e["type"] for e in events] == ["run_started", "reconnect", "step", "stream_gap", "completed"]
    assert s.urls()[1:] == [f"GET /v1/runs/{RUN}/stream?after=1", f"GET /v1/runs/{RUN}/stream?after=2"]
    assert s.requests[1][3] - s.requests[0][3] >= 0.29


def test_204_ends_410_raises_replay_expired_and_404_is_not_retried(script: Callable[[list[Handler]], Script]) -> None:
    s = script([
        answer(204),
        answer(410, {"code": "replay_expired", "status": 410, "detail": "events removed"}),
        answer(404, {"code": "not_found", "status": 404, "detail": "no run x"}),
    ])
    with Client(s.url, "tok") as api:
        assert list(api.follow_run(RUN, after=7)) == []
        with pytest.raises(ReplayExpired) as expired:
            list(api.follow_run(RUN))
        assert expired.value.status == 410 and expired.value.code == "replay_expired"
        assert str(expired.value) == "events removed"
        with pytest.raises(CallbackdError) as missing:
            list(api.follow_run("x"))
        assert missing.value.code == "not_found" and not isinstance(missing.value, ReplayExpired)
    assert len(s.requests) == 3 and s.requests[0][1].endswith("?after=7")


def test_send_message_posts_once_and_finds_its_run_when_cut_before_run_started(
        script: Callable[[list[Handler]], Script]) -> None:
    s = script([
        stream(cut=durable(1, "run_started")),
        answer(200, {"session_id": "s", "active_run_id": RUN}),
        stream("retry: 10\n\n", durable(1, "run_started"), cut=durable(2, "step")),
        stream(terminal(2)),
    ])
    with Client(s.url, "tok") as api:
        assert seqs(list(api.send_message("s", "hi"))) == [1, 2]
    assert s.urls() == ["POST /v1/sessions/s/messages", "GET /v1/sessions/s",
                        f"GET /v1/runs/{RUN}/stream?after=0", f"GET /v1/runs/{RUN}/stream?after=1"]
    assert json.loads(s.requests[0][2]) == {"text": "hi"}


def test_async_client_follows_the_same_rules(script: Callable[[list[Handler]], Script]) -> None:
    s = script([
        stream("retry: 10\n\n", durable(1, "run_started"), cut=durable(2, "step")),
        answer(503, {"code": "unavailable", "detail": "restarting"}),
        stream(durable(2, "step"), terminal(3)),
        answer(409, {"code": "failed_precondition", "detail": "run r is active"}),
    ])

    async def go() -> list[Any]:
        async with AsyncClient(s.url, "tok") as api:
            events = [e async for e in api.follow_run(RUN)]
            with pytest.raises(CallbackdError) as busy:
                [e async for e in api.send_message("s", "again")]
            assert busy.value.status == 409 and "active" in busy.value.detail
            return events

    assert seqs(asyncio.run(go())) == [1, 2, 3]
    assert [u.split("=")[-1] for u in s.urls()[:3]] == ["0", "1", "1"]
    assert len(s.requests) == 4


def test_a_retry_field_alone_before_a_cut_sets_the_delay(script: Callable[[list[Handler]], Script]) -> None:
    s = script([
        stream("retry: 10\n\n", cut=durable(1, "run_started")),
        stream(durable(1, "run_started"), terminal(2)),
    ])
    with Client(s.url, "tok") as api:
        assert seqs(list(api.follow_run(RUN))) == [1, 2]
    assert s.requests[1][3] - s.requests[0][3] < 0.9   # not the 1 s default


def test_fork_calls_send_their_body_and_answer_the_json(script: Callable[[list[Handler]], Script]) -> None:
    forked = {"session": {"session_id": "f"}, "tools": [], "blobs_copied": 3}
    s = script([answer(201, forked), answer(200, {"forks": []}), answer(200, {"forks": []}),
                answer(201, forked), answer(404, {"code": "not_found", "detail": "no run"})])
    with Client(s.url, "tok") as api:
        assert api.fork_session("s", RUN)["blobs_copied"] == 3
        assert api.list_session_forks("s") == {"forks": []}
        assert api.list_run_forks(RUN) == {"forks": []}

    async def run() -> None:
        async with AsyncClient(s.url, "tok") as api:
            assert (await api.fork_session("s", RUN, "before", name="try B"))["session"]["session_id"] == "f"
            with pytest.raises(CallbackdError) as e:
                await api.list_run_forks("gone")
            assert e.value.status == 404 and e.value.code == "not_found"
    asyncio.run(run())
    assert s.urls() == ["POST /v1/sessions/s/fork", "GET /v1/sessions/s/forks", f"GET /v1/runs/{RUN}/forks",
                        "POST /v1/sessions/s/fork", "GET /v1/runs/gone/forks"]
    assert [json.loads(b) for m, _, b, _ in s.requests if m == "POST"] == [
        {"run_id": RUN, "at": "after"}, {"run_id": RUN, "at": "before", "name": "try B"}]
