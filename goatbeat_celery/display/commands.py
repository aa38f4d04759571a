"""Commands suggested to the operator, naming the app given with ``-A``."""

from __future__ import annotations

import shlex

#: What a suggested command says for the app when no -A was given.
ANY_APP = "<your app>"


def command_line(app_given: str | None, words: str) -> str:
    """``celery -A <app> goatbeat <words>`` for the app given with -A, as a suggestion to run
    (``<your app>`` when none was given)."""
    app = ANY_APP if app_given is None else shlex.quote(app_given)
    return f"celery -A {app} goatbeat {words}"


def with_migrate_command(message: str, app_given: str | None) -> str:
    """``message`` from :mod:`goatbeat_celery.migrations`, its migrate command naming the app
    given rather than the placeholder app there."""
    from goatbeat_celery.migrations import MIGRATE_COMMAND

    return message.replace(MIGRATE_COMMAND, command_line(app_given, "migrate"))
