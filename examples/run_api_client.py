#!/usr/bin/env python3
"""A client of callbackd's run API, standard library only.

Starts a session, sends a message, prints the run's typed events as they arrive, and survives a
killed connection by resuming with `after=<last durable seq>` (every durable event exactly once).

    python3 examples/run_api_client.py --url http://127.0.0.1:7420 --token "$API_TOKEN" "Hello"

`--drop-after N` closes the connection after N durable events, once, to show the resume.
Prints one JSON event per line on stdout; progress on stderr.
"""
from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
import urllib.parse


class Api:
    def __init__(self, url: str, token: str):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port or 80
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        c = http.client.HTTPConnection(self.host, self.port, timeout=60)
        c.request(method, path, json.dumps(body) if body is not None else None, self.headers)
        r = c.getresponse()
        data = json.loads(r.read() or b"{}")
        c.close()
        if r.status >= 400:
            raise RuntimeError(f"{method} {path}: {r.status} {data.get('code')}: {data.get('detail')}")
        return data

    def stream(self, method: str, path: str, body: dict | None = None):
        """Yields (id or None, event) for each SSE event; returns at the end of the stream."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=120)
        c.request(method, path, json.dumps(body) if body is not None else None, self.headers)
        r = c.getresponse()
        if r.status == 204:
            c.close()
            return
        if r.status != 200:
            data = json.loads(r.read() or b"{}")
            c.close()
            raise RuntimeError(f"{method} {path}: {r.status} {data.get('code')}: {data.get('detail')}")
        ident, data = None, None
        try:
            while True:
                line = r.readline()
                if not line:
                    return
                line = line.decode().rstrip("\n")
                if line == "":
                    if data is not None:
                        yield ident, json.loads(data)
                    ident, data = None, None
                elif line.startswith("id: "):
                    ident = int(line[4:])
                elif line.startswith("data: "):
                    data = line[6:]
        finally:
            c.close()


def follow(api: Api, first: tuple[str, str, dict | None], drop_after: int | None) -> int:
    """Follows a run to its end; returns the number of reconnects."""
    method, path, body = first
    last, run_id, reconnects = 0, None, 0
    while True:
        ended, count = False, 0
        try:
            for ident, ev in api.stream(method, path, body):
                print(json.dumps(ev), flush=True)
                run_id = ev.get("run_id", run_id)
                if ident is not None:
                    last, count = ident, count + 1
                if ev["type"] in ("completed", "error"):
                    ended = True
                    break
                if ev["type"] == "reconnect":
                    time.sleep(ev["retry_ms"] / 1000)
                    break
                if drop_after is not None and count >= drop_after:
                    drop_after = None
                    print(f"dropping the connection after seq {last}", file=sys.stderr)
                    break
            else:
                ended = ended or last > 0 and method == "GET"  # 204 or closed after the end
        except (OSError, http.client.HTTPException) as e:
            print(f"connection lost ({e}); resuming after seq {last}", file=sys.stderr)
            time.sleep(0.5)
        if ended:
            return reconnects
        if run_id is None:
            raise RuntimeError("the stream ended before naming its run")
        reconnects += 1
        method, path, body = "GET", f"/v1/runs/{run_id}/stream?after={last}", None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--session", help="an existing session id (default: create one)")
    ap.add_argument("--drop-after", type=int)
    ap.add_argument("text")
    args = ap.parse_args()
    api = Api(args.url, args.token)
    session = args.session or api.call("POST", "/v1/sessions", {})["session"]["session_id"]
    print(f"session {session}", file=sys.stderr)
    n = follow(api, ("POST", f"/v1/sessions/{session}/messages", {"text": args.text}), args.drop_after)
    print(f"run ended after {n} reconnect(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
