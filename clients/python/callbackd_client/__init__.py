"""A typed client of callbackd's run API (`/v1`): sessions, messages, runs, approvals, and run
streams that resume by themselves after any drop, yielding every durable event exactly once.

    from callbackd_client import Client
    with Client("http://127.0.0.1:7420", token) as api:
        session = api.create_session()["session"]
        for event in api.send_message(session["session_id"], "hello"):
            print(event["type"], event["seq"])
"""
from .client import AsyncClient, Client
from .errors import CallbackdError, ReplayExpired
from .schema import StreamEvent

__all__ = ["AsyncClient", "CallbackdError", "Client", "ReplayExpired", "StreamEvent"]
