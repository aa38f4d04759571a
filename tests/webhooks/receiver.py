"""A webhook receiver on a real socket, verifying every request as docs/webhooks.md says.

It can be down (its port closed), answer 503, or hang (accept and never answer); it records
each event it accepted, by event id, with the signature check's result. The check is written
here from the documented recipe, not imported from the package under test.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The replay window the docs advise receivers to use.
TOLERANCE = 300


def verified(secret: str, headers: Any, body: bytes) -> bool:
    """The documented check: HMAC-SHA256 over ``<timestamp>.<raw body>``, compared in
    constant time, and a timestamp within five minutes of the receiver's clock."""
    stamp = headers.get("Goatbeat-Timestamp", "")
    given = headers.get("Goatbeat-Signature", "")
    if not stamp.isdigit() or abs(time.time() - int(stamp)) > TOLERANCE:
        return False
    expected = "v1=" + hmac.new(secret.encode(), f"{stamp}.".encode() + body,
                                hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, given)


@dataclass
class Receiver:
    """A receiver on ``port`` (0 picks one); ``mode`` is ``ok``, ``unavailable`` or ``hang``."""

    secret: str
    port: int = 0
    mode: str = "ok"
    #: What was accepted: (event id, body as JSON, signature verified).
    accepted: list[tuple[str, Any, bool]] = field(default_factory=list)
    #: Requests refused with 503 (while unavailable), and the body of that answer.
    refused: int = 0
    answer: bytes = b"down for maintenance"
    _server: ThreadingHTTPServer | None = None
    _release: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if receiver.mode == "hang":
                    receiver._release.wait(60)
                    return
                if receiver.mode == "unavailable":
                    with receiver._lock:
                        receiver.refused += 1
                    self.send_response(503)
                    self.end_headers()
                    self.wfile.write(receiver.answer)
                    return
                with receiver._lock:
                    receiver.accepted.append((self.headers.get("Goatbeat-Event-Id", ""),
                                              json.loads(body),
                                              verified(receiver.secret, self.headers, body)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Close the port (the receiver is down: connections are refused)."""
        self._release.set()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/goatbeat?token=s3cr3t-path"

    def ids(self) -> Counter[str]:
        with self._lock:
            return Counter(event_id for event_id, _, _ in self.accepted)

    def all_verified(self) -> bool:
        with self._lock:
            return all(ok for _, _, ok in self.accepted)
