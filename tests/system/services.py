"""Private servers and faults for the fault scenarios: a PostgreSQL cluster, a MariaDB server
and a Redis server of the scenario's own (so stopping them never touches the machine's shared
ones), a loopback TCP proxy that can be cut to partition one replica from the database, and a
skewed wall clock.

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

from tests.support.waiting import wait_for


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
        wait_for(self._answers, timeout=30, what=f"private PostgreSQL on port {self.port}")

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


class PrivateMariaDB:
    """A throwaway MariaDB server on a free port, from the ``mariadbd`` scripts/services.sh
    installs, with a data directory of its own (the shared server on 3306, which other tests
    use meanwhile, is never touched). :meth:`stop` and :meth:`start` restart it in place."""

    SERVER = "/usr/sbin/mariadbd"
    DATABASE = "goatbeat"

    def __init__(self) -> None:
        if not os.access(self.SERVER, os.X_OK) or shutil.which("mariadb-install-db") is None:
            raise AssertionError("MariaDB is not installed (run scripts/services.sh)")
        self.root = Path(tempfile.mkdtemp(prefix="goatbeat-mariadb-"))
        self.data = self.root / "data"
        self.log_path = self.root / "mariadb.log"
        self.port = free_port()
        self.popen: subprocess.Popen[bytes] | None = None
        # root signs in over TCP without a password, as on the shared server.
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={self.data}",
                        f"--user={pwd.getpwuid(os.geteuid()).pw_name}",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True)

    @property
    def url(self) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/{self.DATABASE}"

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                [self.SERVER, "--no-defaults", f"--datadir={self.data}",
                 f"--port={self.port}", "--bind-address=127.0.0.1",
                 f"--socket={self.root / 'mariadb.sock'}",
                 f"--pid-file={self.root / 'mariadb.pid'}",
                 f"--user={pwd.getpwuid(os.geteuid()).pw_name}",
                 # A test server: durability is not what is under test.
                 "--innodb-flush-log-at-trx-commit=2", "--innodb-buffer-pool-size=32M",
                 "--skip-log-bin"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        wait_for(self._answers, timeout=30, what=f"private MariaDB on port {self.port}")
        import pymysql  # the mysql extra; the lowest-versions tier runs without it

        with pymysql.connect(host="127.0.0.1", port=self.port, user="root",
                             connect_timeout=2, autocommit=True) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{self.DATABASE}` "
                        "CHARACTER SET utf8mb4")

    def _answers(self) -> bool:
        if not self.alive():
            raise AssertionError(f"private MariaDB exited:\n{self.log()[-3000:]}")
        import pymysql

        try:
            pymysql.connect(host="127.0.0.1", port=self.port, user="root",
                            connect_timeout=2).close()
            return True
        except pymysql.MySQLError:
            return False

    def stop(self) -> None:
        """A normal shutdown (SIGTERM): every session is ended, as in a restart."""
        if self.popen is not None:
            _stop_pid(self.popen, signal.SIGTERM, 60)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """A Redis server of the scenario's own, keeping nothing on disk; ``durable``: with an
    append-only file written before each command is answered (``appendfsync always``), so that
    a :meth:`kill` loses nothing Redis acknowledged and :meth:`start` again reads it back."""

    def __init__(self, *, durable: bool = False) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="goatbeat-redis-"))
        self.port = free_port()
        self.durable = durable
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
                 *(["--appendonly", "yes", "--appendfsync", "always"] if self.durable
                   else ["--appendonly", "no"]),
                 "--dir", str(self.root), "--daemonize", "no"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        try:
            wait_for(lambda: self._answers(client), timeout=20,
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

    def kill(self) -> None:
        """SIGKILL the server (by pid) and reap it: no shutdown, no final write."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)

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


class PrivateRabbitMQ:
    """A RabbitMQ node of the scenario's own: its own node name, AMQP and distribution ports,
    data and log directories, config file and (empty) plugin list, so stopping or killing it
    never touches the machine's shared broker.

    The server is the Debian package's ``rabbitmq-server`` run in the foreground as a child of
    the test (not ``-detached``), by the ``rabbitmq`` system user when the test runs as root,
    as the package runs it; its Erlang VM writes its pid to a file, so :meth:`kill` can SIGKILL
    ``beam.smp`` itself. :meth:`stop` is a graceful ``rabbitmqctl stop``; :meth:`start` again
    reuses the same node name and data directory, so durable queues and the persistent
    messages in them survive either. The Erlang cookie is that user's own
    (``/var/lib/rabbitmq/.erlang.cookie`` for ``rabbitmq``), read by the server and by
    ``rabbitmqctl`` alike since both run as that user with the same ``HOME``.

    The node has a virtual host ``0`` besides ``/``: the system harness appends ``/0`` (a
    Redis database number) to the broker URL, which AMQP reads as the virtual host.
    """

    SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
    CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
    #: Seconds a node may take to boot on a busy two-core machine (it takes 3-6 s idle; seen
    #: past 60 s beside the parallel part at its most loaded, rabbitmqctl included). A deadline
    #: for the test's own set-up, not a bound on anything goatbeat does.
    START_TIMEOUT = 120.0

    def __init__(self) -> None:
        for program in (self.SERVER, self.CTL):
            if not os.access(program, os.X_OK):
                raise AssertionError(f"{program} is not installed (run scripts/services.sh)")
        self.root = Path(tempfile.mkdtemp(prefix="goatbeat-rabbitmq-"))
        self.port = free_port()
        self.dist_port = free_port()
        while self.dist_port == self.port:
            self.dist_port = free_port()
        self.node = f"goatbeat-{os.getpid()}-{self.port}@localhost"
        self.popen: subprocess.Popen[bytes] | None = None
        self.beam_pid: int | None = None
        #: Wall-clock instant the last start first accepted a TCP connection on the AMQP port.
        self.answering_since: float | None = None
        self._vhost_made = False
        self._user: dict[str, Any] = {}
        home = os.environ.get("HOME", str(self.root))
        if os.geteuid() == 0:
            account = pwd.getpwnam("rabbitmq")
            home = account.pw_dir
            self._user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        (self.root / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.port}\n"
            # A test broker on a shared machine: a nearly full disk must not block publishers.
            "disk_free_limit.absolute = 1MB\n")
        (self.root / "enabled_plugins").write_text("[].\n")
        (self.root / "rabbitmq-env.conf").write_text("")  # not the package's (rabbit@localhost)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))},
            "HOME": home,
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONF_ENV_FILE": str(self.root / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(self.root / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(self.root / "advanced.config"),  # absent
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.root / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(self.root / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.root / "log"),
            "RABBITMQ_PID_FILE": str(self.root / "beam.pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }
        if self._user:
            for path in (self.root, *self.root.iterdir()):
                os.chown(path, self._user["user"], self._user["group"])

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def ctl(self, *args: str, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
        """``rabbitmqctl -n <node> ...``, as the server's user (the same cookie). Each call
        boots an Erlang VM of its own: seen past 30 s beside the parallel part at its most
        loaded."""
        return subprocess.run([self.CTL, "-n", self.node, *args], env=self.env,
                              cwd=self.root, capture_output=True, text=True, timeout=timeout,
                              check=False, **self._user)

    def start(self) -> None:
        """Boot the node (the same one, on the same data, after a stop or a kill) and wait,
        with a deadline, until it accepts AMQP connections on its port."""
        started = time.monotonic()
        pid_file = self.root / "beam.pid"
        pid_file.unlink(missing_ok=True)
        self.beam_pid = None
        with (self.root / "server.log").open("ab") as log:
            self.popen = subprocess.Popen(
                [self.SERVER], env=self.env, cwd=self.root, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **self._user)
        def remaining() -> float:
            return max(1.0, self.START_TIMEOUT - (time.monotonic() - started))

        def listening() -> bool:
            return self._port_open() and pid_file.exists() and bool(pid_file.read_text().strip())

        wait_for(listening, timeout=remaining(),
                 what=f"private RabbitMQ {self.node} listening on port {self.port}",
                 interval=0.2)
        self.answering_since = time.time()
        self.beam_pid = int(pid_file.read_text().strip())
        done = self.ctl("await_startup", "--timeout", str(int(remaining())),
                        timeout=remaining() + 5)
        if done.returncode != 0:
            raise AssertionError(f"private RabbitMQ {self.node} did not start: "
                                 f"{done.stdout}{done.stderr}\n{self.log()[-3000:]}")
        if not self._vhost_made:  # kept in the node's data across restarts
            self.fresh_vhost()

    def fresh_vhost(self) -> None:
        """Make the virtual host ``0`` anew, empty (about 1 s: three ``rabbitmqctl`` calls)."""
        steps: list[tuple[str, ...]] = [
            ("add_vhost", "0"), ("set_permissions", "-p", "0", "guest", ".*", ".*", ".*")]
        if self._vhost_made:
            steps.insert(0, ("delete_vhost", "0"))
        for step in steps:
            done = self.ctl(*step)
            if done.returncode != 0:
                raise AssertionError(f"rabbitmqctl {' '.join(step)}: "
                                     f"{done.stdout}{done.stderr}")
        self._vhost_made = True

    def revive(self) -> None:
        """Leave the node answering, whatever an earlier scenario did to it: a frozen VM is
        thawed (SIGCONT), a dead or unresponsive one killed and started again."""
        if self.beam_pid is not None:
            try:
                os.kill(self.beam_pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if self.alive() and self.ctl("status", timeout=30).returncode == 0:
            return
        if self.beam_pid is not None:
            self.kill()
        self.start()

    def _port_open(self) -> bool:
        if not self.alive():
            raise AssertionError(f"private RabbitMQ exited:\n{self.log()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        """Graceful: ``rabbitmqctl stop`` (queues and persistent messages are flushed), then
        wait for the server to exit (SIGKILL if it does not, after 30 s)."""
        if not self.alive():
            return
        self.ctl("stop", timeout=60)
        assert self.popen is not None
        _stop_pid(self.popen, signal.SIGTERM, 30)
        self._reap_beam()

    def kill(self) -> None:
        """SIGKILL the Erlang VM (``beam.smp``): no flush, no goodbye to clients."""
        assert self.beam_pid is not None, "the node was never started"
        try:
            os.kill(self.beam_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        assert self.popen is not None
        try:
            self.popen.wait(30)  # the shell that ran beam.smp exits with it
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(10)
        self._reap_beam()

    def _reap_beam(self) -> None:
        """Wait until beam.smp is gone, so the next start can take the same ports."""
        pid = self.beam_pid
        if pid is None:
            return
        def gone() -> bool:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
        try:
            wait_for(gone, timeout=30, what=f"RabbitMQ's beam.smp (pid {pid}) to exit")
        except AssertionError:
            os.kill(pid, signal.SIGKILL)
            raise

    def log(self) -> str:
        parts = []
        for path in (self.root / "server.log", *sorted((self.root / "log").glob("*.log"))):
            if path.exists():
                parts.append(f"--- {path.name}\n{path.read_text(errors='replace')}")
        return "\n".join(parts)

    def close(self) -> None:
        """Discard the node. Its data goes with it, so nothing needs flushing: SIGKILL, a
        tenth of the time a graceful stop takes."""
        try:
            if self.beam_pid is not None and self.alive():
                self.kill()
            else:
                self.stop()
        finally:
            if self.beam_pid is not None:
                try:
                    os.kill(self.beam_pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            shutil.rmtree(self.root, ignore_errors=True)
