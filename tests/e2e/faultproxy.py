"""A TCP proxy on 127.0.0.1 that cuts run-API streams in the middle of an event.

Each connection is forwarded both ways. The first `cuts` connections whose answer carries SSE
events are cut: after `1..max_events` complete events (a blank line ends one) have passed, the
proxy forwards a few bytes of the next event, never its end, and closes both sides. Later
connections pass untouched, so a client that resumes correctly always gets to the end. What was
cut is counted in `cut_log` (the bytes of the partial event), for the test to check that the
drops really fell mid-event.
"""
from __future__ import annotations

import random
import socket
import threading


class FaultProxy:
    def __init__(self, upstream_port: int, cuts: int, max_events: int = 3, seed: int = 20):
        self.upstream = ("127.0.0.1", upstream_port)
        self.cuts_left = cuts
        self.max_events = max_events
        self.rand = random.Random(seed)
        self.lock = threading.Lock()
        self.cut_log: list[bytes] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.closed = True
        self.sock.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
        self._answers(upstream, client)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _answers(self, upstream: socket.socket, client: socket.socket) -> None:
        """Server -> client, counting events; cuts this connection when it is chosen."""
        budget = None            # events still to pass before the cut, once chosen
        pending = b""            # bytes since the last complete event (or the headers)
        try:
            while data := upstream.recv(65536):
                if budget is None and b"\ndata: " in pending + data:
                    with self.lock:
                        if self.cuts_left > 0:
                            self.cuts_left -= 1
                            budget = self.rand.randint(1, self.max_events)
                        else:
                            budget = -1      # never cut this one
                if budget is None or budget < 0:
                    client.sendall(data)
                    pending = (pending + data)[-64:]
                    continue
                buf = pending + data
                out_from = len(pending)
                i = 0
                while budget > 0:
                    end = buf.find(b"\n\n", i)
                    if end < 0:
                        break
                    i = end + 2
                    budget -= 1
                if budget > 0:
                    client.sendall(data)
                    pending = buf[i:] if i else buf
                    continue
                # `i` is where the next event starts; it must have begun for the cut to be mid-event.
                rest = buf[i:].lstrip(b"\r\n0123456789abcdef")
                start = len(buf) - len(rest)
                if not rest.strip():
                    client.sendall(data)
                    pending = buf[i:]
                    continue
                stop = start + max(1, min(len(rest) - 1, self.rand.randint(4, 40)))
                if rest.find(b"\n\n") >= 0:
                    stop = min(stop, start + rest.find(b"\n\n"))
                client.sendall(buf[out_from:stop] if stop > out_from else b"")
                with self.lock:
                    self.cut_log.append(buf[start:stop])
                break
        except OSError:
            pass
        for s in (upstream, client):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
