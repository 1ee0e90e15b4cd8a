"""What the sync and async clients share: the SSE parser and the resume rules.

A follower keeps one position, the seq of the last durable event (an event with an `id:` line)
it yielded. Tokens and control events never move it. Every (re)connect asks for
`after=<that seq>` and drops any durable event at or below it, so each durable event is yielded
exactly once however often the connection breaks.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Optional, cast

import httpx

from .errors import CallbackdError, ReplayExpired
from .schema import StreamEvent

TERMINAL = frozenset({"completed", "error"})
DEFAULT_RETRY_MS = 1000     # until the server sends a `retry:` field
MAX_BACKOFF_MS = 30000
FIND_RUN_S = 60.0           # a POST cut before `run_started`: how long to look for its run


@dataclass
class SseBlock:
    id: Optional[str]
    data: str


@dataclass
class SseParser:
    """Feeds lines (without their line break), returns the block a blank line dispatches.
    WHATWG rules: `data` lines join with "\\n", one space after the colon is dropped; `retry`
    is kept as soon as it is read; comments are ignored."""
    retry_ms: Optional[int] = None
    _id: Optional[str] = None
    _data: list[str] = field(default_factory=list)

    def line(self, line: str) -> Optional[SseBlock]:
        if line == "":
            block = SseBlock(self._id, "\n".join(self._data)) if self._data or self._id is not None else None
            self._id, self._data = None, []
            return block
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None


class Position:
    """The resume state of one follow: its position, its run, how long to wait next. `send`
    (session id, text) makes the first request the POST of a new turn."""

    def __init__(self, run_id: Optional[str], after: int, send: Optional[tuple[str, str]] = None):
        self.run_id = run_id
        self.send = send
        self.sent_at: Optional[float] = None
        self.last = after
        self.retry_ms = DEFAULT_RETRY_MS
        self.failures = 0
        # per connection
        self.progressed = False
        self.reconnect_ms: Optional[int] = None
        self.ended = False
        self.parser: Optional[SseParser] = None

    def connected(self) -> SseParser:
        self.progressed, self.reconnect_ms = False, None
        self.parser = SseParser(retry_ms=None)
        return self.parser

    def accept(self, block: SseBlock, parser: SseParser) -> Optional[StreamEvent]:
        """The event to yield for `block`, or None (a replay overlap, not JSON)."""
        if parser.retry_ms is not None:
            self.retry_ms = parser.retry_ms
        try:
            ev = json.loads(block.data)
        except ValueError:
            return None
        if not isinstance(ev, dict):
            return None
        durable = block.id is not None
        if durable:
            try:
                seq = int(block.id or "")
            except ValueError:
                return None
            if seq <= self.last:
                return None
            self.last, self.progressed = seq, True
        kind = ev.get("type")
        if kind == "run_started" and self.run_id is None and ev.get("run_id"):
            self.run_id = str(ev["run_id"])
        if kind == "reconnect":
            self.reconnect_ms = int(ev.get("retry_ms", self.retry_ms))
        if durable and kind in TERMINAL:
            self.ended = True
        return cast(StreamEvent, ev)

    def stream_closed(self) -> float:
        """The connection ended (cleanly, cut, or after a stream_gap): seconds to wait."""
        if self.parser is not None and self.parser.retry_ms is not None:
            self.retry_ms = self.parser.retry_ms   # a `retry:` with no event after it
        self.failures = 0 if self.progressed or self.reconnect_ms is not None else self.failures + 1
        if self.reconnect_ms is not None:
            return self.reconnect_ms / 1000
        return self.backoff()

    def failed(self) -> float:
        self.failures += 1
        return self.backoff()

    def backoff(self) -> float:
        ms = self.retry_ms if self.failures == 0 else self.retry_ms * 2 ** (self.failures - 1)
        return min(ms, MAX_BACKOFF_MS) / 1000

    def lost_post(self) -> bool:
        """The POST's stream broke before `run_started` named the run: it must be found."""
        return self.send is not None and self.run_id is None and self.sent_at is not None

    def found(self, run_id: Optional[str]) -> float:
        """What looking for the lost POST's run gave: seconds to wait before the next step."""
        self.run_id = run_id
        if run_id is not None:
            return 0.0
        if time.time() - (self.sent_at or 0) > FIND_RUN_S:
            raise CallbackdError(0, "the connection broke while the message was sent, and no run of it appeared")
        return self.failed()

    def request(self, http: httpx.Client | httpx.AsyncClient, base: str, headers: dict[str, str]) -> httpx.Request:
        """The next stream request: the turn's POST (once), else the run's GET ?after=."""
        headers = {**headers, "Accept": "text/event-stream"}
        if self.send is not None and self.run_id is None:
            self.sent_at = time.time()
            return http.build_request("POST", f"{base}/v1/sessions/{quote(self.send[0])}/messages",
                                      json={"text": self.send[1]}, headers=headers)
        return http.build_request("GET", f"{base}/v1/runs/{quote(self.run_id or '')}/stream?after={self.last}",
                                  headers=headers)

    def after_stream(self) -> float:
        """Seconds to wait after a stream closed without the run's end."""
        return 0.0 if self.send is not None and self.run_id is None else self.stream_closed()


def quote(part: str) -> str:
    from urllib.parse import quote as q
    return q(part, safe="")


def error_of(status: int, body: bytes) -> CallbackdError:
    problem: Any = None
    try:
        problem = json.loads(body) if body else None
    except ValueError:
        problem = None
    if not isinstance(problem, dict):
        text = body[:500].decode(errors="replace")
        problem = None
        detail = f"callbackd answered {status}" + (f": {text}" if text else "")
    else:
        detail = str(problem.get("detail") or f"callbackd answered {status}")
    cls = ReplayExpired if status == 410 else CallbackdError
    return cls(status, detail, problem)


def retryable(status: int) -> bool:
    """The daemon restarting or overloaded: try again (501 means no bridge, for good)."""
    return (status >= 500 and status != 501) or status == 429


def refused(e: Exception) -> bool:
    """The connection was refused: the request never reached the server."""
    return isinstance(e, httpx.ConnectError)


def newest_run_since(page_runs: list[Any], sent_at: float) -> Optional[str]:
    from datetime import datetime
    if not page_runs:
        return None
    last = page_runs[-1]
    created = last.get("created_at")
    if not created:
        return None
    try:
        t = datetime.fromisoformat(str(created).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return str(last["run_id"]) if t >= sent_at - 5 else None
