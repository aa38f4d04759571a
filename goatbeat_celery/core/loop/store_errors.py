"""How the loop reports a store error: an outage or a passing refusal as a warning (it is
retried, and may pass), a missing privilege as an error that says how to fix it (it will not
pass by itself, and the replica cannot lead until someone grants it)."""

from __future__ import annotations

import logging

from goatbeat_celery.core.links import doc
from goatbeat_celery.core.types.errors import StoreDenied, StoreError

__all__ = ["DENIED_FIX", "report_store_error"]

#: What to do about a missing privilege.
DENIED_FIX = ("a privilege is missing, which no retry fixes: `celery goatbeat check` lists "
              f"every GRANT beat needs ({doc('deploying.md#least-privilege-roles')})")


def report_store_error(log: logging.Logger, message: str, *args: object, exc: StoreError,
                       action: str) -> None:
    """Log ``message % args`` for ``exc``: ERROR with :data:`DENIED_FIX` when a privilege is
    missing, WARNING otherwise."""
    if isinstance(exc, StoreDenied):
        log.error("%s; %s", message % args, DENIED_FIX, extra={"action": action})
    else:
        log.warning(message, *args, extra={"action": action})
