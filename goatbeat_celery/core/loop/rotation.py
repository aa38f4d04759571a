"""Rotated schedules' dispatches given their occurrence's index on the trigger's grid, which
the submitter turns into the queue each message goes to
(:mod:`goatbeat_celery.core.rules.rotation`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from goatbeat_celery.core.loop.trigger_cache import TriggerCache
from goatbeat_celery.core.rules.rotation import occurrence_index
from goatbeat_celery.core.types.claims import Dispatch
from goatbeat_celery.core.types.errors import GoatbeatError
from goatbeat_celery.core.types.spec import TriggerSpec, quoted_name

logger = logging.getLogger(__name__)


def indexed(dispatches: Sequence[Dispatch], triggers: TriggerCache) -> Sequence[Dispatch]:
    """``dispatches`` with each rotated one's ``rotation_index`` set; one whose trigger cannot
    be built keeps None (the submitter refuses its message alone, and the schedule is set
    aside as for any message that cannot be built). The same list when none is rotated."""
    if not any(dispatch.rotate for dispatch in dispatches):
        return dispatches
    found: list[Dispatch] = []
    for dispatch in dispatches:
        if dispatch.rotate and dispatch.trigger is not None:
            try:
                trigger = triggers.get(TriggerSpec.from_json(dispatch.trigger))
                index = occurrence_index(trigger, dispatch.execution.occurrence_at)
            except (GoatbeatError, KeyError, ValueError, OverflowError) as exc:
                logger.warning("occurrence %s: its rotation index cannot be worked out: %s",
                               quoted_name(dispatch.key), exc,
                               extra={"action": "rotation_index"})
            else:
                dispatch = replace(dispatch, rotation_index=index)
        found.append(dispatch)
    return found
