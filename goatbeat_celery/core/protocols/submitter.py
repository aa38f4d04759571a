"""Handing claimed occurrences to the task system."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from goatbeat_celery.core.types.claims import Dispatch, SubmitResult


class TaskSubmitter(Protocol):
    """Hands claimed occurrences to the task system (Celery)."""

    def submit(self, dispatches: Sequence[Dispatch], *, token: int,
               timeout: float) -> SubmitResult:
        """Send each dispatch with its key as the task id.

        Must return within about ``timeout`` seconds whatever the broker does, and never raise:
        a broker that cannot be reached fails the rest of the batch (``failed``, retried later
        under the same keys); a message that cannot be built or is refused for itself fails
        alone (``rejected``) and the batch goes on.
        """
        ...
