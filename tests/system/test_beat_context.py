"""A plain ``celery -A proj beat -S goatbeat_celery.Scheduler`` publishes with the beat's app
current, as Celery's own beat does: code that runs inside a publish (``before_task_publish``
handlers, tracing clients) finds the project's app and its tasks, those registered on that app
only included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis

from tests.conftest import stop_process
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.system, pytest.mark.slow]

HERE = Path(__file__).parent


def test_a_publish_hook_sees_the_beats_app_and_its_private_task(
        tmp_path: Path, fresh_pg_url: str, redis_url: str) -> None:
    seen = tmp_path / "seen.jsonl"
    queue = f"ctx-{uuid.uuid4().hex[:10]}"
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
           "CTX_BROKER_URL": f"{redis_url}/0", "CTX_QUEUE": queue,
           "CTX_DATABASE_URL": fresh_pg_url, "CTX_SEEN": str(seen)}
    log = tmp_path / "beat.log"
    with log.open("ab") as output:
        beat = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "ctxproj", "beat", "-S",
             "goatbeat_celery.Scheduler", "--loglevel", "INFO", "-s",
             str(tmp_path / "beat.schedule")],
            cwd=tmp_path, env=env, stdout=output, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
    try:
        # Start-up (imports, the lease, the config sync) takes a few seconds on a busy
        # 2-core machine; the schedule runs every second after that.
        wait_for(lambda: seen.exists() and len(seen.read_text().splitlines()) >= 2,
                 timeout=60, what="two publishes of the private task")
    except AssertionError:
        print(log.read_text(errors="replace")[-6000:])
        raise
    finally:
        stop_process(beat, timeout=10)
        redis.Redis.from_url(redis_url).delete(queue)
    records = [json.loads(line) for line in seen.read_text().splitlines()]
    for record in records:
        assert record["app"] == "ctxproj", record
        assert record["registered"] is True, record
        # goatbeat sends on a thread of its own, beside the loop that claims the next batch;
        # a claim sent again (a first send cut by the lease's local deadline on a busy
        # machine) goes from the loop's thread, before new claims.
        if record["send"] == 1:
            assert record["thread"] == "goatbeat-submit", record
        else:
            assert record["thread"] == "MainThread", record
        assert str(record["task_id"]).startswith("private-every-second:")
