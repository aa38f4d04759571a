"""The quickstart's worker prints each run as the README's sample shows it: the task's own
line, without Celery's log prefix."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import stop_process_groups
from tests.docs.context import QUICKSTART

README = Path(__file__).resolve().parents[2] / "README.md"
#: Starting a solo worker takes a few seconds; 60 s covers a busy 2-core machine.
TIMEOUT = 60


def test_the_worker_prints_the_readme_sample_lines(tmp_path: Path) -> None:
    sample = re.search(r"^ran '\w+' occurrence=\S+ task_id=\S+$", README.read_text(), re.M)
    assert sample is not None, "the README shows a sample line"
    shutil.copy(QUICKSTART, tmp_path / "proj.py")
    env = {**os.environ, "QUICKSTART_DIR": str(tmp_path / "var"), "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    # As the quickstart does: the broker's queue declared before two processes use it.
    subprocess.run([sys.executable, "-m", "celery", "-A", "proj", "goatbeat", "migrate"],
                   cwd=tmp_path, env=env, check=True, capture_output=True, timeout=TIMEOUT)
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "proj", "worker", "--pool", "solo",
             "--loglevel", "WARNING", "--without-heartbeat", "--without-gossip",
             "--without-mingle"], cwd=tmp_path, env=env, stdout=sink,
            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        sender = subprocess.run(
            [sys.executable, "-c", "from proj import report; report.apply_async(['sample'], "
             "task_id='sample-id', headers={'goatbeat_occurrence': 'x'})"],
            cwd=tmp_path, env=env, check=True, capture_output=True, timeout=TIMEOUT)
        assert sender.returncode == 0
        deadline = time.monotonic() + TIMEOUT
        while "ran 'sample'" not in log.read_text(errors="replace"):
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        stop_process_groups([worker], 10)
    lines = [line for line in log.read_text().splitlines() if "ran 'sample'" in line]
    assert lines == ["ran 'sample' occurrence=x task_id=sample-id"]
