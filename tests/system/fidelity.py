"""The fidelity scenarios' world: ``fidproj`` processes and the raw messages they send."""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.system.harness import HERE, Process, World

#: Starting a beat or worker (imports of Celery, SQLAlchemy, kombu; schema check; lease) takes
#: 2-5 s here; six times that on a busy two-core machine before calling it stuck.
STARTUP = 30.0


@dataclass
class FidWorld(World):
    """The processes of one scenario running ``fidproj``: records (and, unless ``broker_url``
    names another server, the broker) on ``redis_url``; all keys under the scenario's prefixes
    are deleted at the end."""

    prefixes: list[str] = field(default_factory=list)

    def prefix(self, label: str) -> str:
        prefix = f"fid-{self.run_id}-{label}:"
        self.prefixes.append(prefix)
        return prefix

    def start(self, name: str, prefix: str, args: Sequence[str], *,
              scenario: str = "fidelity", env: dict[str, str] | None = None) -> Process:
        environment = dict(os.environ)
        environment.update({
            "PYTHONPATH": os.pathsep.join([str(HERE), environment.get("PYTHONPATH", "")]),
            "FID_PREFIX": prefix,
            "FID_SCENARIO": scenario,
            "FID_BROKER_URL": f"{self.broker_url}/0",
            "FID_RECORD_URL": f"{self.redis_url}/0",
            "FID_DATABASE_URL": self.database_url,
            **(env or {}),
        })
        return self.spawn(name, [sys.executable, "-m", "celery", "-A", "fidproj", *args],
                          environment)

    def start_beat(self, name: str, prefix: str, scheduler: str, *,
                   scenario: str = "fidelity", env: dict[str, str] | None = None) -> Process:
        return self.start(name, prefix, ["beat", "-S", scheduler, "--loglevel", "INFO",
                                         "-s", str(self.workdir / f"{name}-schedule")],
                          scenario=scenario, env=env)

    def start_worker(self, name: str, prefix: str, *, scenario: str,
                     env: dict[str, str] | None = None) -> Process:
        return self.start(name, prefix, [
            "worker", "--pool", "threads", "--concurrency", "8", "-Q", "fid.default",
            "-n", f"{name}-{self.run_id}@%h", "--without-heartbeat", "--without-gossip",
            "--without-mingle", "--loglevel", "INFO"], scenario=scenario, env=env)

    def listed(self, key: str) -> list[dict[str, Any]]:
        """The JSON records fidproj appended to the list ``key``."""
        return [json.loads(item) for item in self.redis.lrange(key, 0, -1)]

    def executions(self) -> list[dict[str, Any]]:
        return self.sql("SELECT key, schedule_name, occurrence_at, due_at, token, state, "
                        "claimed_at, submitted_at, attempts, manual, expires_at "
                        "FROM goatbeat_execution ORDER BY due_at, key")

    def messages(self, prefix: str) -> list[Message]:
        """Every message under ``prefix``, oldest first within each list (kombu LPUSHes and
        its consumers BRPOP, so the oldest is at the right end)."""
        found = []
        for raw_key in self.redis.scan_iter(match=f"{prefix}*", count=1000):
            key = raw_key.decode()[len(prefix):]
            if key.startswith("_kombu.") or self.redis.type(raw_key) != b"list":
                continue
            for item in reversed(self.redis.lrange(raw_key, 0, -1)):
                message = json.loads(item)
                assert message["properties"]["body_encoding"] == "base64", message
                body = base64.b64decode(message["body"]).decode(
                    message["content-encoding"])
                found.append(Message(key=key, raw=message, headers=message["headers"],
                                     properties=message["properties"], body=body))
        return found

    def first_by_task(self, prefix: str) -> dict[str, Message]:
        first: dict[str, Message] = {}
        for message in self.messages(prefix):
            first.setdefault(message.task, message)
        return first

    def clean_up(self) -> None:
        for prefix in self.prefixes:
            keys = list(self.redis.scan_iter(match=f"{prefix}*", count=1000))
            if keys:
                self.redis.delete(*keys)


def assert_alive(*processes: Process) -> bool:
    """True, or fail with the log of a process that exited (for use inside a polled condition)."""
    for process in processes:
        assert process.alive(), f"{process.name} exited:\n{process.log()[-4000:]}"
    return True


# -- the world: fidproj processes, each with its own broker key prefix ----------------------------
@dataclass
class Message:
    """One raw kombu message as the Redis transport stored it."""

    key: str  # the list it sits in, without the process's prefix (queue + priority suffix)
    raw: dict[str, Any]
    headers: dict[str, Any]
    properties: dict[str, Any]
    body: str  # the decoded JSON text: [args, kwargs, embed]

    @property
    def task(self) -> str:
        return str(self.headers["task"])
