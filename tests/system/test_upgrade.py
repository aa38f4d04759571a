"""A rolling upgrade: the previous release's beat and this one on one database.

The order docs/upgrading.md gives: the previous release leads on its schema; the schema is
migrated while it runs; this release's replicas join; the previous release's replica stops and
hands over. Throughout, no occurrence is claimed twice and none is lost.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest

from goatbeat_celery.migrations import current_revision, downgrade, head_revision, upgrade
from tests.support.waiting import wait_for
from tests.system.harness import (
    FAST_LEASE,
    HERE,
    STEP,
    TAKEOVER_BOUND,
    Cluster,
    assert_alive,
    every_second,
    finish,
    run_for,
)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
#: The previous release: the commit its package was built from, and the schema it runs on.
PREVIOUS_RELEASE = "ab5be82"
PREVIOUS_SCHEMA = "0001"


def previous_release(into: Path) -> Path:
    """The previous release's package, unpacked from the repository's history into ``into``;
    a directory to put first on PYTHONPATH."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", PREVIOUS_RELEASE,
                              "goatbeat_celery"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def test_the_previous_release_and_this_one_share_a_database_through_an_upgrade(
        cluster: Cluster, tmp_path: Path, report: Any) -> None:
    downgrade(cluster.engine, PREVIOUS_SCHEMA)
    old_code = previous_release(tmp_path / "previous")
    old_env = {"PYTHONPATH": os.pathsep.join([str(old_code), str(HERE),
                                              os.environ.get("PYTHONPATH", "")])}
    schedules = every_second(10)
    cluster.write_config(schedules=schedules, settings=FAST_LEASE)
    cluster.start_worker()
    old = cluster.start_beat("beat-previous", env=old_env)
    assert cluster.wait_for_leader() is old
    started = cluster.db_now()
    run_for(3)

    upgrade(cluster.engine)  # `celery -A proj goatbeat migrate`, while the old one leads
    assert current_revision(cluster.engine) == head_revision()
    new = cluster.start_beat("beat-new")
    # The handover is measured from a standby ready to take over (connected and listening),
    # not from a process still importing on a loaded machine.
    cluster.wait_for_replicas(2)
    run_for(3)
    assert_alive(old, new)
    assert cluster.leader_pid() == old.pid, "the running previous release keeps leading"

    handed_at = time.time()
    old.stop()  # SIGTERM: the previous release releases its lease on the way out
    wait_for(lambda: cluster.leader_pid() == new.pid, timeout=TAKEOVER_BOUND,
             what="the new release to take the lease over")
    handover = time.time() - handed_at
    run_for(3)
    assert_alive(new)
    outcome = finish(cluster, [new])

    report(handover=f"{handover:.2f}s", **outcome.counts())
    outcome.assert_sound(duplicates_allowed=True)
    assert outcome.until is not None
    missing = outcome.missing(STEP, started + STEP, outcome.until, schedules)
    assert all(points == [] for points in missing.values()), missing
    # Rows written before and after the migration, by either release, read as runs not
    # started (the worker here does not track runs, and none has waited run_start_timeout).
    (runs,) = cluster.sql("SELECT count(*) AS n, count(*) FILTER (WHERE run_state IS NULL "
                          "AND run_attempts = 0) AS untouched FROM goatbeat_execution")
    assert runs["n"] == runs["untouched"] >= outcome.counts()["executions"] > 0, runs
    # The previous release refuses to start on the migrated schema (it checks the revision):
    # replicas are replaced, never restarted on the old code, after the migration.
    late = cluster.start_beat("beat-previous-again", env=old_env)
    assert late.popen.wait(30) != 0
    assert "upgrade goatbeat_celery" in late.log()
