"""One webhook request, bounded as a whole by a deadline.

A socket's timeout bounds each read: a receiver that sends one byte every 0.8 s never trips a
timeout of 1 s, and holds the request as long as it likes. Here the timeout is the request's
own: the connection, the TLS handshake, sending the body and reading the answer share one
deadline, and each socket operation may wait only what is left of it. (The host name's
resolution is the system resolver's, bounded by its own settings.)

What a receiver answered is kept only as a short, escaped text: its newlines, ANSI escapes and
other control characters are written as ``\\n``, ``\\x1b``… so that it can never forge a log
line or a terminal's display, and never more than :data:`ANSWER_KEPT` characters of it.
"""

from __future__ import annotations

import http.client
import io
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

from goatbeat_celery.display import shown
from goatbeat_celery.settings.webhook_urls import shown_url, target

#: How much of a receiver's answer is read, and kept (escaped) in the error of an attempt.
ANSWER_KEPT = 200

Clock = Callable[[], float]


class DeliveryFailed(Exception):
    """One request that the receiver did not accept (a status, a timeout, a refusal)."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        #: The request ran out of time (rather than being refused or answered).
        self.timed_out = timed_out


class _Deadline:
    def __init__(self, seconds: float, clock: Clock) -> None:
        self._clock = clock
        self._at = clock() + seconds

    def left(self) -> float:
        """The seconds left; TimeoutError once there are none."""
        left = self._at - self._clock()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        return left


class _DeadlineSocket:
    """A connected socket whose every operation waits at most what is left of ``deadline``:
    what :mod:`http.client` needs of a socket, and no more."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self._sock = sock
        self._deadline = deadline

    def sendall(self, data: Any) -> None:
        self._sock.settimeout(self._deadline.left())
        self._sock.sendall(data)

    def recv_into(self, buffer: Any) -> int:
        self._sock.settimeout(self._deadline.left())
        return self._sock.recv_into(buffer)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_Reader(self))

    def close(self) -> None:
        # http.client closes the connection's socket while its answer is still read:
        # post() closes the real one when it is done.
        pass


class _Reader(io.RawIOBase):
    def __init__(self, sock: _DeadlineSocket) -> None:
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)


_TLS = ssl.create_default_context()


def post(url: str, body: bytes, headers: Mapping[str, str], timeout: float, *,
         clock: Clock = time.monotonic) -> None:
    """POST ``body`` to ``url``, the whole request within ``timeout`` seconds; any 2xx answer
    accepts it, anything else (a redirect too: it would lose the body) raises DeliveryFailed
    naming the failure, never the URL."""
    deadline = _Deadline(timeout, clock)
    connection: http.client.HTTPConnection | None = None
    sock: socket.socket | None = None
    try:
        where = target(url)
        # The class gives the Host header its default port; the connection is made here.
        connection = (http.client.HTTPSConnection(where.host, where.port, context=_TLS)
                      if where.tls else http.client.HTTPConnection(where.host, where.port))
        sock = socket.create_connection((where.host, where.port), timeout=deadline.left())
        if where.tls:
            sock.settimeout(deadline.left())  # the handshake as a whole
            sock = _TLS.wrap_socket(sock, server_hostname=where.host)
        # http.client sends and reads through this socket, no longer connecting itself.
        connection.sock = _DeadlineSocket(sock, deadline)
        connection.request("POST", where.path, body=body, headers=dict(headers))
        answer = connection.getresponse()
        status = answer.status
        said = answer.read(ANSWER_KEPT) if not 200 <= status < 300 else b""
    except TimeoutError:
        raise DeliveryFailed(f"timed out: no whole answer within {timeout:g}s",
                             timed_out=True) from None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        # An error may quote the URL: name the failure, never the URL.
        text = str(exc).replace(url, shown_url(url))
        raise DeliveryFailed(f"{type(exc).__name__}: {answer_text(text.encode())}") from None
    finally:
        if connection is not None:
            connection.close()
        if sock is not None:
            sock.close()
    if not 200 <= status < 300:
        text = answer_text(said)
        raise DeliveryFailed(f"HTTP {status}" + (f": {text}" if text else ""))


def answer_text(raw: bytes) -> str:
    """What a receiver said, fit for a log line: decoded, its control characters escaped, cut
    to :data:`ANSWER_KEPT` characters."""
    text = shown(raw[:ANSWER_KEPT].decode("utf-8", "replace").strip())
    return text if len(text) <= ANSWER_KEPT else text[:ANSWER_KEPT - 1] + "…"
