"""A real ``celery beat`` replica: its health endpoints, ``goatbeat health`` against it through
a freeze and a stop, and the outbox's events reaching a webhook from it."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest

from goatbeat_celery.core.types.outbox import OutboxEvent
from goatbeat_celery.store import open_store
from tests.system.harness import FAST_LEASE, RENEW, TTL, Cluster, every_second, wait_until
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.system

SECRET = "whsec-system-test"
LEADING, LEASE_LOST, NOT_RUNNING = 0, 4, 5
#: A beat process starting, connecting and taking the lease on a busy 2-core machine.
START = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def get(port: int, path: str) -> tuple[int, dict[str, Any]] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return None  # not serving yet


def health(cluster: Cluster, holder: str) -> int:
    result = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "sysproj", "goatbeat", "health", "--holder",
         holder], cwd=cluster.workdir, env=cluster.env(), capture_output=True, text=True,
        timeout=60)
    return result.returncode


def test_a_beat_replica_is_live_ready_leading_then_lost_then_stopped(
        cluster: Cluster) -> None:
    receiver = Receiver(secret=SECRET).start()
    port = free_port()
    try:
        cluster.write_config(schedules=every_second(1), settings={
            **FAST_LEASE, "metrics_port": port, "webhooks": [receiver.url],
            "webhook_secret": SECRET, "webhook_retry_backoff": 0.2,
            "webhook_retry_backoff_max": 1})
        beat = cluster.start_beat("beat")
        cluster.wait_for_leader(timeout=START)
        holder = f"{socket.gethostname()}:{beat.pid}"

        # The lease row names the holder as soon as it is taken; the replica leads (dispatches)
        # once it has synced the config under it, a moment later.
        def leading() -> tuple[int, dict[str, Any]] | None:
            answer = get(port, "/healthz")
            return answer if answer is not None and answer[1].get("leading") else None

        live = wait_until(leading, timeout=START, what="/healthz to say leading")
        assert live[0] == 200 and live[1]["live"] is True
        assert get(port, "/readyz") == (200, {"ready": True, "leading": True})
        assert health(cluster, holder) == LEADING

        # Events an alert would enqueue reach the webhook from the beat process, once each.
        store = open_store(cluster.database_url)
        try:
            store.enqueue_events([OutboxEvent(event_id=f"alert-{n}", kind="alert.opened",
                                              payload={"n": n}) for n in range(3)])
        finally:
            store.close()
        wait_until(lambda: len(receiver.ids()) == 3, timeout=START, what="events delivered")
        assert receiver.ids() == {"alert-0": 1, "alert-1": 1, "alert-2": 1}
        assert receiver.all_verified()

        # Frozen past its lease: it believed it led, and the database says it lost the lease.
        beat.signal(signal.SIGSTOP)
        wait_until(lambda: not (cluster.lease() or {}).get("live"), timeout=TTL + START,
                   what="the frozen leader's lease to expire")
        assert health(cluster, holder) == LEASE_LOST
        beat.signal(signal.SIGCONT)
        # Thawed, it renews (no one else took over) within a renew interval.
        wait_until(lambda: health(cluster, holder) == LEADING, timeout=RENEW + START,
                   what="the thawed replica to lead again")

        assert beat.stop() == 0
        assert health(cluster, holder) == NOT_RUNNING
    finally:
        receiver.stop()
