"""Which stored schedules may send their task (core.rules.allowlist): one rule for the API's run-now
and backfill and for the leader's planning."""

from __future__ import annotations

from goatbeat_celery.core.rules.allowlist import sending_problems
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, TriggerSpec

EVERY_MINUTE = TriggerSpec(kind="interval", params={"every": 60})


def only_reports(task: str) -> bool:
    return task.startswith("reports.")


def spec(task: str, source: ScheduleSource) -> ScheduleSpec:
    return ScheduleSpec(name="nightly", task=task, trigger=EVERY_MINUTE, source=source)


def never(candidate: ScheduleSpec) -> bool:
    return False


def always(candidate: ScheduleSpec) -> bool:
    return True


def test_an_api_row_may_send_an_allowed_task() -> None:
    assert sending_problems(spec("reports.daily", ScheduleSource.API), only_reports, never) == ()


def test_an_api_row_may_not_send_a_task_outside_the_allow_list() -> None:
    problems = [str(p) for p in sending_problems(spec("db.drop", ScheduleSource.API),
                                                  only_reports, always)]

    assert problems == ["task: 'db.drop' is not in goatbeat_allowed_tasks; add it there"]


def test_an_own_config_entry_sends_any_task() -> None:
    assert sending_problems(spec("db.vacuum", ScheduleSource.CONFIG), only_reports, always) == ()


def test_a_config_row_that_is_not_an_own_entry_needs_the_allow_list() -> None:
    forged = spec("db.drop", ScheduleSource.CONFIG)

    assert sending_problems(spec("reports.x", ScheduleSource.CONFIG), only_reports, never) == ()
    [problem] = map(str, sending_problems(forged, only_reports, never))
    assert "not this replica's beat_schedule entry 'nightly'" in problem
    assert "'db.drop'" in problem
