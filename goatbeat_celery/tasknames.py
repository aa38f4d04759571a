"""Whether a schedule's task is one the Celery app knows: a warning, never a refusal (beat
sends tasks by name and need not import every task module), the same in every face; and
whether the args and kwargs fit the signature of a task it knows: a refusal."""

from __future__ import annotations

import difflib
import inspect
import logging
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from goatbeat_celery.core.rules.arguments import signature_problems
from goatbeat_celery.core.types.problems import Problem

logger = logging.getLogger(__name__)


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


class TaskSignatures:
    """The signatures of the tasks registered in ``app``, to refuse a schedule whose args and
    kwargs its task would reject (:mod:`~goatbeat_celery.core.rules.arguments`). A task the
    app does not know is not checked: beat sends tasks by name (the faces warn instead). The
    task modules are imported once, on the first check, as a worker imports them."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._imported = False

    def signature(self, task: str) -> inspect.Signature | None:
        """The signature ``task``'s ``run`` is called with, or None when it is unknown here
        or its signature cannot be read."""
        if not self._imported:
            self._imported = True
            try:
                self.app.loader.import_default_modules()
            except Exception:  # unimportable modules: their tasks go unchecked, warned of
                logger.debug("importing the task modules failed", exc_info=True)
        found = self.app.tasks.get(task)
        if found is None:
            return None
        try:
            # ``run`` as the worker calls it: a bound task's ``self`` is already bound.
            return inspect.signature(found.run)
        except (TypeError, ValueError):  # a callable with no readable signature
            return None

    def problems(self, task: object, args: object, kwargs: object) -> list[Problem]:
        """Each way the schedule's args and kwargs do not fit ``task`` (none for a task not
        registered here, or arguments not yet of the right shape)."""
        if not isinstance(task, str) or not isinstance(args, (list, tuple)) \
                or not isinstance(kwargs, Mapping):
            return []
        signature = self.signature(task)
        if signature is None:
            return []
        return signature_problems(task, signature, args, kwargs)
