"""Which stored schedules may send their task: the allow-list rule, written once.

A row created through the API (or by SQL) may send only a task ``goatbeat_allowed_tasks``
covers. A config row is exempt only while it is exactly one of the sender's own ``beat_schedule``
entries: whoever can write a row can write ``source='config'`` into it, so the mark alone proves
nothing. A caller that does not hold the entries (the API, in an operator's process) cannot tell
an entry from a forged row and passes an ``own_entry`` that accepts every config row; the leader
judges again, against its own entries, before it sends anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec


def sending_problems(spec: ScheduleSpec, task_allowed: Callable[[str], bool],
                     own_entry: Callable[[ScheduleSpec], bool]) -> Sequence[Problem]:
    """Why ``spec`` may not send its task: empty when it may. ``task_allowed`` is the
    allow-list; ``own_entry`` says whether a config row is one of the caller's entries."""
    if spec.source is ScheduleSource.CONFIG and own_entry(spec):
        return ()
    if task_allowed(spec.task):
        return ()
    if spec.source is ScheduleSource.CONFIG:
        return [Problem("source", "marked 'config' but it is not this replica's beat_schedule "
                        f"entry {spec.name!r} as configured, and task {spec.task!r} is not in "
                        "goatbeat_allowed_tasks")]
    return [Problem("task", f"{spec.task!r} is not in goatbeat_allowed_tasks", "add it there")]
