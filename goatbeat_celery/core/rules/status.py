"""What a face shows of a schedule's status (:mod:`goatbeat_celery.core.types.status`, which
this name still imports).

A paused or ended schedule has no next run to show: what is stored there is when it would have
run, which is past or meaningless until it is resumed (:func:`shows_next_run`). A pause with
an end has one: its first occurrence after the end.
"""

from __future__ import annotations

from goatbeat_celery.core.types.status import State, Status, status

__all__ = ["State", "Status", "shows_next_run", "status"]


def shows_next_run(state: State) -> bool:
    """Whether a face shows the stored next run: only while the schedule will run then."""
    return state not in (State.PAUSED, State.ENDED)
