"""Whether a schedule's task is one the Celery app knows: a warning, never a refusal (beat
sends tasks by name and need not import every task module), the same in every face."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable
from typing import Any


def registered_tasks(apps: Iterable[Any]) -> set[str]:
    """The task names of ``apps`` once their task modules are imported as a worker imports
    them (``imports``, ``include``, autodiscovery). Raises what importing them raises."""
    names: set[str] = set()
    for app in apps:
        app.loader.import_default_modules()
        names.update(str(name) for name in app.tasks)
    return names


def unknown_task_warning(task: str, known: Collection[str], where: str) -> str | None:
    """Why storing ``task`` deserves a warning (None when ``known`` has it), with the closest
    known name as a hint."""
    if task in known:
        return None
    close = difflib.get_close_matches(task, [n for n in known if not n.startswith("celery.")],
                                      n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (f"task {task!r} is not registered in {where}{hint}: stored anyway, as beat sends "
            "tasks by name, but a worker that does not know it rejects every run")
