"""An imported interval keeps django-celery-beat's phase with an offset: its runs are due, and
sent, the offset after the grid point their task id names. The import, the admin's lists and
a schedule's history say the same as what goatbeat's leader did."""

from __future__ import annotations

import io
import math
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.execution import idempotency_key
from goatbeat_celery.display import when
from tests.django.admin_pages import CHANGELIST, EXECUTIONS, change_url, history_of

EVERY = 3
#: The offset the import gives: the last run sits 1.5 s into a 3-second step of the grid, and
#: the import rounds a phase up to the second.
OFFSET = timedelta(seconds=2)


def _import_shifted(name: str) -> str:
    """A 3-second periodic task whose last run puts its phase 2 s after goatbeat's grid,
    imported; the command's report."""
    from django.core.management import call_command
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    now = datetime.now(timezone.utc)
    step = math.floor(now.timestamp() / EVERY) * EVERY
    last = datetime.fromtimestamp(step - EVERY + 1.5, timezone.utc)
    every = IntervalSchedule.objects.get_or_create(every=EVERY, period="seconds")[0]
    PeriodicTask.objects.create(name=name, task="shop.ping", interval=every, last_run_at=last)
    out = io.StringIO()
    call_command("goatbeat_import_django_celery_beat", stdout=out, no_color=True)
    return out.getvalue()


def _run_once(api: Schedules, name: str) -> Any:
    """What goatbeat's leader sends of ``name`` first: the recorded send."""
    from goatbeat_celery import config as config_module
    from goatbeat_celery.core.types.settings import Settings
    from goatbeat_celery.testing import RecordingSubmitter, build_engine

    submitter = RecordingSubmitter()
    engine = build_engine(api.store, submitter=submitter, triggers=config_module.base_registry(),
                          settings=Settings())
    # The first run is at most one interval and the offset away (5 s); 30 s covers a busy
    # 2-core machine many times over.
    deadline = datetime.now(timezone.utc) + timedelta(seconds=30)
    try:
        while not submitter.of(name):
            assert datetime.now(timezone.utc) < deadline, submitter.keys()
            api.store.wait(min(engine.tick(), 0.5))
    finally:
        engine.close()
    return submitter.of(name)[0].execution


def test_the_admin_shows_an_imported_intervals_runs_when_beat_sent_them(
        client: Any, api: Schedules, django_db: str) -> None:
    from django.utils import formats
    from django.utils import timezone as django_timezone

    from goatbeat_celery.contrib.django.models import Schedule

    output = _import_shifted("shifted")
    imported = api.get("shifted")
    assert imported.spec.offset == OFFSET
    assert imported.next_occurrence_at is not None and imported.next_run_at is not None
    first_key = idempotency_key("shifted", imported.next_occurrence_at)
    # The import names the first run's task id and why it is earlier than the run.
    assert (f"next run {when(imported.next_run_at)} (task id {first_key!r}: the grid point "
            "2s before it)") in output, output

    sent = _run_once(api, "shifted")
    assert sent.key == first_key
    assert sent.due_at == sent.occurrence_at + OFFSET

    # The list's last run is when the run was due and sent, not the grid point.
    page = client.get(CHANGELIST)
    cl = page.context["cl"]
    [row] = [row for row in cl.result_list if row.pk == "shifted"]
    assert cl.model_admin.last_run(row) == sent.due_at
    # So is the change page's status, and its history names the run's task id beside it.
    text = client.get(change_url("shifted")).content.decode()
    [history] = history_of(text)
    assert history[0] == formats.localize(django_timezone.localtime(sent.due_at))
    assert history[1] == f"<code>{sent.key}</code>"
    # The executions list shows both instants.
    executions = client.get(EXECUTIONS).context["cl"]
    assert {"due_at", "occurrence_at"} <= set(executions.list_display)

    # Once the retention has pruned the run, the schedule's own offset gives the same instant.
    engine = sa.create_engine(django_db, poolclass=sa.NullPool)
    with engine.begin() as connection:
        connection.execute(sa.text("DELETE FROM goatbeat_execution"))
    engine.dispose()
    cl = client.get(CHANGELIST).context["cl"]
    [row] = [row for row in cl.result_list if row.pk == "shifted"]
    assert row.last_occurrence_at == sent.occurrence_at
    assert cl.model_admin.last_run(row) == sent.due_at
    assert Schedule.objects.get(pk="shifted").shift() == OFFSET


def test_the_shift_of_a_stored_row_is_the_specs(api: Schedules) -> None:
    from goatbeat_celery.contrib.django.models import Schedule

    api.create("plain", "feeds.poll", every=60)
    api.create("offset", "feeds.poll", every=60, offset=15)
    api.create("jittered", "feeds.poll", every=60, jitter=60)
    for name in ("plain", "offset", "jittered"):
        assert Schedule.objects.get(pk=name).shift() == api.get(name).spec.effective_offset()
