"""The settings Celery must mask when it prints configuration: goatbeat's webhooks.

Celery masks a setting in ``celery report``, in the answer to ``celery inspect conf`` (any
client of the broker may ask a worker) and in ``app.conf.humanize()`` when its name matches
``celery.app.utils.HIDDEN_SETTINGS`` (API, TOKEN, KEY, SECRET, PASS…), looking into dicts but
not into lists. ``goatbeat_webhook_secret`` matches already; ``goatbeat_webhooks`` does not, and
it holds secrets: each webhook's own ``secret``, and incoming-webhook URLs, whose path or query is
their secret. :func:`hide_secret_settings` adds it to that pattern, once per process: the
``celery`` command does it for every command (goatbeat's plug-in is imported by each, worker and
``report`` included), and reading goatbeat's configuration does it wherever else it runs.
"""

from __future__ import annotations

import re

from celery.app import utils

__all__ = ["HIDDEN", "hide_secret_settings"]

#: goatbeat's settings Celery would print although they hold secrets (any namespace prefix).
HIDDEN = ("GOATBEAT_WEBHOOKS",)


def hide_secret_settings() -> None:
    """Make Celery mask :data:`HIDDEN` wherever it prints configuration (idempotent)."""
    pattern = getattr(utils, "HIDDEN_SETTINGS", None)
    if not isinstance(pattern, re.Pattern):
        # A Celery that masks otherwise: never break the celery command over it (the tests
        # of celery report and inspect conf tell whether it still masks them).
        return
    missing = [name for name in HIDDEN if not pattern.search(name)]
    if missing:
        # Celery reads the module's pattern each time it masks: replacing it is enough.
        utils.HIDDEN_SETTINGS = re.compile(
            "|".join([pattern.pattern, *map(re.escape, missing)]), pattern.flags)
