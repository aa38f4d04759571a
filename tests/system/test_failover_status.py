"""What ``status`` tells an operator before, during and after the leader goes silent: the
holder renewing, then silent with the lease still running out, then the standby that took it
over and since when. Real beat replicas on PostgreSQL; the leader frozen with SIGSTOP (a
process that dies ends its database session, and a standby takes over at once: a frozen one
keeps its session, and the lease runs out on the clock)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

import pytest

from tests.support.waiting import wait_for
from tests.system.harness import Cluster

pytestmark = pytest.mark.slow

#: A ttl long enough that the silent phase (from half a renewal past the last one until the
#: expiry, about 28 s here) outlasts a few `status` commands, each a Celery start-up that took
#: up to 8 s on a loaded two-core machine (at 15 s, the lease was taken over between the JSON
#: command that saw the silence and the text one).
TTL = 30.0
RENEW = 1.0
LEASE = {"lease_ttl": TTL, "lease_renew_interval": RENEW, "max_interval": 1.0}
#: After the freeze: the lease runs out (ttl after the last renewal, at most ttl after the
#: freeze), the standby asks at its expiry, and a second covers a busy machine.
TAKEOVER_BOUND = TTL + RENEW + 1.0
#: Each `status` is a new interpreter importing Celery: 20 s covers a loaded machine.
COMMAND_TIMEOUT = 20


def status(cluster: Cluster, *json_flag: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "sysproj", "goatbeat", "status", *json_flag],
        cwd=cluster.workdir, env=cluster.env(), capture_output=True, text=True,
        timeout=COMMAND_TIMEOUT, check=True)
    return json.loads(done.stdout) if json_flag else done.stdout


def pid_of(holder: str | None) -> int | None:
    return None if holder is None else int(holder.split(":")[-2])


def test_status_tells_a_frozen_leader_from_a_live_one_and_names_its_successor(
        cluster: Cluster) -> None:
    cluster.write_config(schedules={}, settings=LEASE)
    first = cluster.start_beat("beat-1")
    assert cluster.wait_for_leader() is first
    second = cluster.start_beat("beat-2")
    cluster.wait_for_replicas(2)

    # Before: a holder renewing on time (polled: a starved leader may renew late once).
    def renewing() -> dict[str, Any] | None:
        lease = status(cluster, "--json")["lease"]
        return lease if lease["held"] and not lease["holder_silent"] else None
    before = wait_for(renewing, timeout=COMMAND_TIMEOUT, what="a renewing holder")
    assert pid_of(before["holder"]) == first.pid and before["renew_interval"] == RENEW
    assert before["silent_seconds"] <= RENEW * 1.5

    first.signal(signal.SIGSTOP)

    # During: still the holder on paper, but silent, with the expiry counting down.
    def silent() -> dict[str, Any] | None:
        lease = status(cluster, "--json")["lease"]
        return lease if lease["holder_silent"] or lease["token"] != before["token"] else None
    during = wait_for(silent, timeout=TTL, what="status to report the holder silent")
    assert during["token"] == before["token"], "taken over before the silence was seen"
    assert during["held"] and pid_of(during["holder"]) == first.pid
    assert during["silent_seconds"] > RENEW * 1.5
    assert 0 < during["seconds_left"] <= TTL
    text = status(cluster)
    assert "holder silent for" in text and "then a standby takes over" in text

    # After: the standby holds it under the next token, renewing, since its takeover.
    def taken() -> dict[str, Any] | None:
        lease = status(cluster, "--json")["lease"]
        return lease if lease["token"] > before["token"] and lease["held"] else None
    after = wait_for(taken, timeout=TAKEOVER_BOUND + COMMAND_TIMEOUT,
                     what="status to show the standby holding the lease")
    assert pid_of(after["holder"]) == second.pid and after["token"] == before["token"] + 1
    assert not after["holder_silent"]
    assert after["acquired_at"] > before["acquired_at"]
    assert second.alive()
