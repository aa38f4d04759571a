"""Health endpoints for orchestrators, served beside ``/metrics`` on ``goatbeat_metrics_port``.

* ``GET /healthz`` (liveness): 200 while the scheduling loop keeps turning, that is a tick
  began within ``lease_ttl + lease_renew_interval`` (every replica, leader or standby, ticks at
  least each renew interval, and no call in a tick outlives the lease's local validity); 503
  once it has not, a loop stuck for good, which a restart cures.
* ``GET /readyz`` (readiness): 200 when the database answers a read of the lease row; 503 when
  it does not. A replica that cannot reach its database can neither lead nor stand by.

Both answer a small JSON object (``live`` or ``ready``, whether this replica leads, and the
reason of a failure, never the database URL), and cost nothing on the scheduling path: the
loop only writes a monotonic instant each tick.
"""

from __future__ import annotations

import json
import logging
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from goatbeat_celery.core.types.errors import StoreUnavailable

logger = logging.getLogger(__name__)

__all__ = ["HealthEndpoints", "Liveness", "serve"]

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

LIVENESS_PATH = "/healthz"
READINESS_PATH = "/readyz"


class Liveness:
    """When the scheduling loop last began a tick, on the monotonic clock."""

    def __init__(self, *, stale_after: timedelta,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.stale_after = stale_after.total_seconds()
        self._mono = monotonic
        # Started counts as a tick: the first one follows at once.
        self._last = monotonic()

    def ticked(self) -> None:
        self._last = self._mono()

    def since(self) -> float:
        """Seconds since the last tick began."""
        return max(0.0, self._mono() - self._last)

    def live(self) -> bool:
        return self.since() <= self.stale_after


class HealthEndpoints:
    """``/healthz`` and ``/readyz`` in front of another WSGI app (the metrics)."""

    def __init__(self, *, liveness: Liveness, leading: Callable[[], bool],
                 read_database: Callable[[], object]) -> None:
        self.liveness = liveness
        self._leading = leading
        self._read_database = read_database

    def _leads(self) -> bool:
        try:
            return bool(self._leading())
        except Exception:  # a probe never fails on how leadership is read
            return False

    def liveness_answer(self) -> tuple[int, dict[str, Any]]:
        since = round(self.liveness.since(), 3)
        live = since <= self.liveness.stale_after
        answer: dict[str, Any] = {"live": live, "leading": self._leads(),
                                  "last_tick_seconds_ago": since}
        if not live:
            answer["reason"] = (f"the scheduling loop has not ticked for {since:g}s (more "
                                f"than {self.liveness.stale_after:g}s)")
        return (200 if live else 503), answer

    def readiness_answer(self) -> tuple[int, dict[str, Any]]:
        try:
            self._read_database()
        except StoreUnavailable:
            return 503, {"ready": False, "leading": False, "reason": "database unreachable"}
        except Exception as exc:  # a probe answers whatever the read raised
            return 503, {"ready": False, "leading": False,
                         "reason": f"database error: {type(exc).__name__}"}
        return 200, {"ready": True, "leading": self._leads()}

    def wrap(self, inner: WSGIApp) -> WSGIApp:
        """A WSGI app answering the two paths itself and passing anything else to ``inner``."""
        answers = {LIVENESS_PATH: self.liveness_answer, READINESS_PATH: self.readiness_answer}

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            answer = answers.get(environ.get("PATH_INFO", ""))
            if answer is None:
                return inner(environ, start_response)
            status, body = answer()
            data = json.dumps(body).encode()
            start_response("200 OK" if status == 200 else "503 Service Unavailable", [
                ("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                ("Cache-Control", "no-store")])
            return [] if environ.get("REQUEST_METHOD") == "HEAD" else [data]

        return app


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    """One thread per request: a slow readiness read never holds a scrape."""

    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    """No line on stderr per request (probes come every few seconds)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(app: WSGIApp, *, addr: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    """Serve ``app`` on ``addr:port`` (IPv4 or IPv6) from a daemon thread. Raises OSError
    when the address cannot be bound."""
    family = socket.getaddrinfo(addr or None, port, type=socket.SOCK_STREAM,
                                flags=socket.AI_PASSIVE)[0][0]

    class Server(_Server):
        address_family = family

    server = make_server(addr, port, app, Server, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="goatbeat-metrics",
                              daemon=True)
    thread.start()
    return server, thread
