"""Private servers and faults for the fault scenarios: a PostgreSQL cluster and a Redis server
of the scenario's own (so stopping them never touches the machine's shared ones), a loopback TCP
proxy that can be cut to partition one replica from the database, and a skewed wall clock.

Every server is a child process of the test, started and ended by pid.
"""

from __future__ import annotations

import glob
import os
import pwd
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import redis

from tests.system.harness import wait_until


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel's choice)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stop_pid(popen: subprocess.Popen[bytes], signum: int, timeout: float) -> None:
    if popen.poll() is None:
        popen.send_signal(signum)
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(timeout)


def postgres_bin(name: str) -> str:
    """A PostgreSQL server program from the newest installed version."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                   key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise AssertionError(f"PostgreSQL's {name} is not installed (run scripts/services.sh)")
    return found[-1]


class PrivatePostgres:
    """A throwaway PostgreSQL cluster on a free port, run by the ``postgres`` system user
    (initdb and postgres refuse root). :meth:`stop` and :meth:`start` restart it in place."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="goatbeat-pg-"))
        self.data = self.root / "data"
        self.log_path = self.root / "postgres.log"
        self.port = free_port()
        self.popen: subprocess.Popen[bytes] | None = None
        self._user: dict[str, Any] = {}
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self._user = {"user": account.pw_uid, "group": account.pw_gid,
                          "extra_groups": []}
        subprocess.run(
            [postgres_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
             "-E", "UTF8", "--no-sync", "--no-instructions"],
            check=True, capture_output=True, **self._user,
        )

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def pid(self) -> int | None:
        return None if self.popen is None else self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                [postgres_bin("postgres"), "-D", str(self.data), "-p", str(self.port),
                 "-k", str(self.root), "-c", "listen_addresses=127.0.0.1",
                 # A test database: durability is not what is under test.
                 "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off", "-c", "shared_buffers=32MB"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **self._user,
            )
        wait_until(self._answers, timeout=30, what=f"private PostgreSQL on port {self.port}")

    def _answers(self) -> bool:
        if not self.alive():
            raise AssertionError(f"private PostgreSQL exited:\n{self.log()[-3000:]}")
        try:
            with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                                 dbname="postgres", connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        """Fast shutdown (SIGINT to the postmaster): sessions are ended, as in a restart."""
        if self.popen is not None:
            _stop_pid(self.popen, signal.SIGINT, 30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """A Redis server of the scenario's own, keeping nothing on disk."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="goatbeat-redis-"))
        self.port = free_port()
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            raise AssertionError("redis-server is not installed (run scripts/services.sh)")
        with (self.root / "redis.log").open("ab") as log:
            self.popen = subprocess.Popen(
                [executable, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(self.root), "--daemonize", "no"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        try:
            wait_until(lambda: self._answers(client), timeout=20,
                       what=f"private Redis on port {self.port}")
        finally:
            client.close()

    def _answers(self, client: redis.Redis) -> bool:
        if not self.alive():
            raise AssertionError("private Redis exited")
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self.popen is not None:
            _stop_pid(self.popen, signal.SIGTERM, 15)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class PartitionProxy:
    """A loopback TCP proxy between one replica and PostgreSQL that the test can cut.

    Cut, it stops forwarding in both directions and accepts no new connection, but closes
    nothing: the replica's sockets stay open and its calls simply get no answer, as across a
    network partition. What was sent meanwhile stays in the kernel's buffers and is delivered
    on :meth:`heal`, the way TCP retransmits after a partition ends (``drop=True`` discards it
    instead). One thread moves the bytes.
    """

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._peers: dict[socket.socket, socket.socket] = {}
        self._forwarding = threading.Event()
        self._forwarding.set()
        self._drop = False
        self._stopped = threading.Event()
        self.cut_at: float | None = None
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="partition-proxy", daemon=True)
        self._thread.start()

    def cut(self, *, drop: bool = False) -> float:
        """Partition: returns the wall-clock instant of the cut."""
        self._drop = drop
        self._forwarding.clear()
        self.cut_at = time.time()
        return self.cut_at

    def heal(self) -> None:
        self._forwarding.set()

    def connections(self) -> int:
        return len(self._peers) // 2

    def close(self) -> None:
        self._stopped.set()
        self._forwarding.set()
        self._thread.join(10)
        for sock in list(self._peers):
            sock.close()
        self._listener.close()
        self._selector.close()

    def _run(self) -> None:
        while not self._stopped.is_set():
            if not self._forwarding.is_set() and not self._drop:
                # Partitioned: read nothing, accept nothing.
                self._forwarding.wait(0.05)
                continue
            for key, _ in self._selector.select(timeout=0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    if self._forwarding.is_set():
                        self._accept()
                    continue
                self._pump(sock)

    def _accept(self) -> None:
        client, _ = self._listener.accept()
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        for one, other in ((client, upstream), (upstream, client)):
            self._peers[one] = other
            self._selector.register(one, selectors.EVENT_READ, None)

    def _pump(self, sock: socket.socket) -> None:
        other = self._peers.get(sock)
        if other is None:
            return
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._close_pair(sock, other)
            return
        if not self._forwarding.is_set():
            if self._drop:
                self.dropped += len(data)
                return
            # Read just as the cut began: held like the rest, delivered on healing.
            self._forwarding.wait()
            if self._stopped.is_set():
                return
        try:
            other.sendall(data)
        except OSError:
            self._close_pair(sock, other)

    def _close_pair(self, one: socket.socket, other: socket.socket) -> None:
        for sock in (one, other):
            if self._peers.pop(sock, None) is not None:
                self._selector.unregister(sock)
            sock.close()


def faketime_env(offset: str) -> dict[str, str]:
    """Environment that runs a process with its wall clock shifted by ``offset`` (libfaketime,
    e.g. ``"+1h"``); its monotonic clock stays true, as on a host whose clock is merely wrong."""
    found = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    if not found:
        raise AssertionError("libfaketime is not installed (apt-get install faketime; "
                             "scripts/services.sh does it)")
    return {"LD_PRELOAD": found[0], "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_NO_CACHE": "1"}
