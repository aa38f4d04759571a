"""The message headers goatbeat puts on every run it sends (read back by
:func:`goatbeat_celery.occurrence_of` on the worker). Their names are the core's
(:mod:`goatbeat_celery.core.types.headers`), where validation refuses them in a schedule's
``options.headers``."""

from __future__ import annotations

from goatbeat_celery.core.types.headers import (
    CELERY_BEAT,
    MANUAL,
    OCCURRENCE,
    OWN,
    SCHEDULE,
    SEND,
    TOKEN,
)

__all__ = ["CELERY_BEAT", "MANUAL", "OCCURRENCE", "OWN", "SCHEDULE", "SEND", "TOKEN"]
