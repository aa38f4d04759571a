"""Edits made in the admin reach a running beat: ``celery beat -S goatbeat_celery.Scheduler``
of the test project, in a subprocess on the module's database (its broker is Celery's in-memory
transport, inside that process), while the admin is driven through Django's test client.

Verdicts come from the executions beat records, read through the Schedules API.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.errors import ScheduleConflict
from goatbeat_celery.core.types.execution import Execution, ExecutionState
from tests.conftest import stop_process
from tests.django.admin_pages import ADD, CHANGELIST, change_url, form_data
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: Beat imports Celery and Django and takes the lease in a few seconds; 60 s covers a busy
#: 2-core machine.
START_TIMEOUT = 60
#: An edit wakes the leader at once (LISTEN/NOTIFY); a run is sent within a second or two.
REACH_TIMEOUT = 20
T = TypeVar("T")


@pytest.fixture
def beat(django_db: str, api: Schedules, tmp_path: Path) -> Iterator[Path]:
    """A beat replica of the test project; yields its log file."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.django.testproj.settings",
           # The project's settings take their database from this URL.
           "GOATBEAT_TEST_PG_URL": django_db,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                       os.environ.get("PYTHONPATH")]))}
    log = tmp_path / "beat.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.django.testproj.celery", "beat",
             "-S", "goatbeat_celery.Scheduler", "--loglevel", "INFO"],
            cwd=tmp_path, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: process.poll() is not None or "acquired lease" in log.read_text(),
                 "beat to take the lease", timeout=START_TIMEOUT)
        assert process.poll() is None, f"beat exited:\n{log.read_text()}"
        yield log
    finally:
        stop_process(process, timeout=20)


def claimed(api: Schedules, name: str, *, manual: bool = False) -> list[Execution]:
    """The runs beat claimed (sent or not yet)."""
    return [execution for execution in api.history(name, limit=200)
            if execution.manual is manual]


def sent(api: Schedules, name: str, *, manual: bool = False) -> list[Execution]:
    return [execution for execution in claimed(api, name, manual=manual)
            if execution.state is ExecutionState.SUBMITTED]


def act(client: Any, action: str, *names: str) -> str:
    response = client.post(CHANGELIST, {"action": action, "_selected_action": list(names)},
                           follow=True)
    assert response.status_code == 200
    return str(response.content.decode())


def test_schedules_added_paused_run_and_edited_in_the_admin_reach_beat(
        client: Any, api: Schedules, beat: Path) -> None:
    # Added in the admin: beat runs it every second.
    response = client.post(ADD, form_data(name="poll", every="1"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    wait_for(lambda: len(sent(api, "poll")) >= 2, "beat to send poll's runs", timeout=REACH_TIMEOUT)

    # Paused in the admin: beat claims no more runs of it (one it was claiming as the pause
    # was written may still be recorded just after).
    assert "1 schedule paused" in act(client, "pause_schedules", "poll")
    time.sleep(1.5)
    settled = len(claimed(api, "poll"))
    time.sleep(3)
    assert len(claimed(api, "poll")) == settled, beat.read_text()

    # Run now from the admin, while paused: beat sends that one run.
    assert "queued to run now" in act(client, "run_now", "poll")
    wait_for(lambda: sent(api, "poll", manual=True), "beat to send the run now",
             timeout=REACH_TIMEOUT)
    assert len(claimed(api, "poll")) == settled

    # Edited and resumed through the change form: beat runs it on the new interval.
    version = client.get(change_url("poll")).context["adminform"].form.initial["version"]
    response = client.post(change_url("poll"), form_data(every="2", version=str(version)))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert api.get("poll").spec.trigger.params["every"] == 2.0
    edited_at = api.get("poll").updated_at
    assert edited_at is not None

    def sent_since_the_edit() -> list[Execution] | None:
        found = [execution for execution in sent(api, "poll")
                 if execution.claimed_at > edited_at]
        return found if len(found) >= 2 else None

    new = wait_for(sent_since_the_edit, "beat to send poll on its new interval",
                   timeout=REACH_TIMEOUT)
    # On a 2-second grid counted from the epoch.
    assert all(int(execution.occurrence_at.timestamp()) % 2 == 0 for execution in new), new

    # A control set through the form, max runs: beat makes the runs it leaves, then no more.
    current = api.get("poll")
    limit = current.total_runs + 2
    response = client.post(change_url("poll"), form_data(every="2", max_runs=str(limit),
                                                         version=str(current.version)))
    assert response.status_code == 302, response.context["adminform"].form.errors
    wait_for(lambda: api.get("poll").total_runs >= limit, "beat to make the last runs",
             timeout=REACH_TIMEOUT)
    # A further run would be due within the 2-second interval; 3 s leaves a second of margin.
    time.sleep(3)
    ended = api.get("poll")
    assert ended.total_runs == limit, beat.read_text()
    assert ended.next_run_at is None
    assert f"{limit} run, " in client.get(change_url("poll")).content.decode()
    assert f"(at most {limit} runs)" in client.get(change_url("poll")).content.decode()


#: Rounds of each face's edit, pause and resume while beat runs the schedule every second.
ROUNDS = 20


def test_an_every_second_schedule_is_edited_paused_and_resumed_from_every_face_while_it_runs(
        beat: Path, api: Schedules, client: Any) -> None:
    from goatbeat_celery.web import create_app
    from tests.web.conftest import Browser, form_token

    api.create("poll", "feeds.poll", every=1)
    wait_for(lambda: len(sent(api, "poll")) >= 2, "beat to run poll", timeout=REACH_TIMEOUT)

    def after_a_run(read_version: int) -> None:
        """Hold the form open until beat has run the schedule (its row written) since the
        form was read, as a person typing would."""
        row_version = api.get("poll").row_version
        wait_for(lambda: api.get("poll").row_version > row_version, "beat to run poll again",
                 timeout=REACH_TIMEOUT)
        assert api.get("poll").version == read_version  # runs never move it

    refusals: list[str] = []
    for round_ in range(ROUNDS):
        # The API: an edit made against the version read before a run, then pause and resume.
        shown = api.get("poll").version
        after_a_run(shown)
        api.update("poll", args=(round_,), expected_version=shown)
        api.pause("poll")
        api.resume("poll")

    with Browser(create_app(api), base_url="http://127.0.0.1") as browser:
        for round_ in range(ROUNDS):
            page = browser.get("/schedule", params={"name": "poll"}).text
            shown = int(page.split('name="version" value="')[1].split('"')[0])
            after_a_run(shown)
            edit = {"csrf_token": form_token(page), "name": "poll", "task": "feeds.poll",
                    "kind": "every", "every": "1", "args": f"[{round_}, \"web\"]",
                    "version": str(shown)}
            for path, fields in (("/schedule/edit", edit), ("/schedule/pause", edit),
                                 ("/schedule/resume", edit)):
                response = browser.post(path, data=fields, follow_redirects=False)
                if response.status_code != 303:
                    refusals.append(f"web {path}: {response.status_code}")

    for round_ in range(ROUNDS):
        page = client.get(change_url("poll"))
        shown = page.context["adminform"].form.initial["version"]
        after_a_run(shown)
        response = client.post(change_url("poll"), form_data(
            every="1", args=f"[{round_}, \"admin\"]", version=str(shown)))
        if response.status_code != 302:
            refusals.append(f"admin edit: {response.context['adminform'].form.errors}")
        for action in ("pause_schedules", "resume_schedules"):
            acted = client.post(CHANGELIST, {"action": action, "_selected_action": ["poll"]},
                                follow=True)
            if "error" in acted.content.decode().lower():
                refusals.append(f"admin {action}")

    assert refusals == []
    final = api.get("poll")
    assert final.spec.args == (ROUNDS - 1, "admin") and final.spec.enabled
    # Every edit moved the definition's version once; pauses and runs never did.
    assert final.version == 1 + 3 * ROUNDS
    # A true concurrent edit of the definition is still refused.
    with pytest.raises(ScheduleConflict, match="was edited since it was read"):
        api.update("poll", args=("stale",), expected_version=final.version - 1)
