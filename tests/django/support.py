"""Helpers of the Django tests: running Celery's own beat, and the import command."""

from __future__ import annotations

import io
from datetime import datetime, timedelta

#: How long django-celery-beat's simulated beat may loop before a test calls it stuck: each
#: step either runs the task or sleeps until is_due says it may be due.
_STEPS = 10_000


def import_tasks_ok(*args: str) -> str:
    from django.core.management import call_command

    out = io.StringIO()
    call_command("goatbeat_import_django_celery_beat", *args, stdout=out, no_color=True)
    return out.getvalue()


def celery_beat_runs(task: object, clock_start: datetime, count: int) -> list[datetime]:
    """The instants django-celery-beat's DatabaseScheduler sends ``task`` (a PeriodicTask),
    its own ModelEntry.is_due driven by a clock that starts at ``clock_start`` and moves as
    beat's loop does, sleeping exactly the seconds is_due returns: a run happens at the first
    instant is_due says so, and the next entry dates its last run then, as beat does."""
    from django_celery_beat.schedulers import ModelEntry
    from django_celery_beat.utils import NEVER_CHECK_TIMEOUT

    from tests.django.testproj.celery import app

    clock = [clock_start]

    class FixedClockEntry(ModelEntry):  # type: ignore[misc]
        def __init__(self, model: object, app: object = app) -> None:
            super().__init__(model, app=app)
            self.schedule.nowfun = lambda: clock[0]

        def _default_now(self) -> datetime:
            return clock[0]

    runs: list[datetime] = []
    if not task.enabled:  # type: ignore[attr-defined]
        return runs  # is_due would ask again every 5 s, forever: a disabled task never runs
    entry = FixedClockEntry(task)
    for _ in range(_STEPS):
        due, wait = entry.is_due()
        if due:
            runs.append(clock[0])
            if len(runs) == count:
                return runs
            entry = next(entry)
        elif wait >= NEVER_CHECK_TIMEOUT:
            return runs
        else:
            clock[0] += timedelta(seconds=wait)
    raise AssertionError(f"no decision after {_STEPS} steps for {task}")
