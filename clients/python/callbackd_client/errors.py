"""The errors of the run API client."""
from __future__ import annotations

from typing import Any, Optional


class CallbackdError(Exception):
    """An answer of the API that is not a success: its status and problem document."""

    def __init__(self, status: int, detail: str, problem: Optional[dict[str, Any]] = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.problem = problem
        self.code: Optional[str] = str(problem["code"]) if problem and problem.get("code") else None


class ReplayExpired(CallbackdError):
    """`410 replay_expired`: retention removed the events the stream would need; read the run's
    state (`get_run`) instead."""
