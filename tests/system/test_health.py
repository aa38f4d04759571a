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
from tests.support.waiting import wait_for
from tests.system.harness import FAST_LEASE, RENEW, TTL, Cluster, every_second
from tests.webhooks.receiver import Receiver

pytestmark = [pytest.mark.system, pytest.mark.slow]

SECRET = "whsec-system-test"
LEADING, STANDBY, LEASE_LOST, NOT_RUNNING = 0, 3, 4, 5
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

        live = wait_for(leading, timeout=START, what="/healthz to say leading")
        assert live[0] == 200 and live[1]["live"] is True
        # Polled too: a starved leader may let its 3 s lease lapse between two requests, and
        # /readyz then says so (seen on a loaded machine).
        wait_for(lambda: get(port, "/readyz") == (200, {"ready": True, "leading": True}),
                 timeout=START, what="/readyz to say ready and leading")
        assert health(cluster, holder) == LEADING

        # Events an alert would enqueue reach the webhook from the beat process, once each.
        store = open_store(cluster.database_url)
        try:
            store.enqueue_events([OutboxEvent(event_id=f"alert-{n}", kind="alert.opened",
                                              payload={"n": n}) for n in range(3)])
        finally:
            store.close()
        wait_for(lambda: len(receiver.ids()) == 3, timeout=START, what="events delivered")
        assert receiver.ids() == {"alert-0": 1, "alert-1": 1, "alert-2": 1}
        assert receiver.all_verified()

        # Frozen past its lease: it believed it led, and the database says it lost the lease.
        beat.signal(signal.SIGSTOP)
        wait_for(lambda: not (cluster.lease() or {}).get("live"), timeout=TTL + START,
                 what="the frozen leader's lease to expire")
        assert health(cluster, holder) == LEASE_LOST
        beat.signal(signal.SIGCONT)
        # Thawed, it renews (no one else took over) within a renew interval.
        wait_for(lambda: health(cluster, holder) == LEADING, timeout=RENEW + START,
                 what="the thawed replica to lead again")

        assert beat.stop() == 0
        assert health(cluster, holder) == NOT_RUNNING
    finally:
        receiver.stop()


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGSTOP"])
def test_a_leader_killed_or_frozen_and_replaced_has_lost_its_lease(
        cluster: Cluster, fault: str) -> None:
    # The default ttl for a kill (the standby learns of it from the database at once); a
    # short one for a freeze, whose session lives on: the standby waits for the clock.
    settings = {"lease_ttl": 30, "lease_renew_interval": 10} if fault == "SIGKILL" \
        else FAST_LEASE
    cluster.write_config(schedules=every_second(1), settings=settings)
    leader = cluster.start_beat("beat-1")
    cluster.wait_for_leader(timeout=START)
    standby = cluster.start_beat("beat-2")
    cluster.wait_for_replicas(2, timeout=START)
    before = cluster.lease()
    assert before is not None
    holder = f"{socket.gethostname()}:{leader.pid}"

    leader.signal(getattr(signal, fault))
    wait_for(lambda: (cluster.lease() or {}).get("token", 0) > before["token"]
             and (cluster.lease() or {}).get("live"), timeout=TTL + START,
             what="the standby to take the lease over")
    after = cluster.lease()
    assert after is not None and after["holder"].split(":")[-2] == str(standby.pid)

    lost = health_answer(cluster, holder)
    assert lost["exit_code"] == LEASE_LOST, lost
    assert lost["replica"].startswith(holder + ":")
    assert after["holder"] in lost["reason"]  # who holds it, and since when
    [row] = cluster.sql("SELECT changed_at FROM goatbeat_lease WHERE name = 'default'")
    assert row["changed_at"].isoformat(timespec="seconds").replace("+00:00", "Z") \
        in lost["reason"]
    if fault == "SIGSTOP":
        leader.signal(signal.SIGCONT)
        # Thawed, it finds its lease taken and stands by: heard from after the change.
        wait_for(lambda: health(cluster, holder) == STANDBY, timeout=RENEW + START,
                 what="the thawed replica to stand by")


def health_answer(cluster: Cluster, holder: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "sysproj", "goatbeat", "health", "--holder",
         holder, "--json"], cwd=cluster.workdir, env=cluster.env(), capture_output=True,
        text=True, timeout=60)
    answer: dict[str, Any] = json.loads(result.stdout)
    assert answer["exit_code"] == result.returncode
    return answer
