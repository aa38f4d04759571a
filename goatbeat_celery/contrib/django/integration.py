"""The Celery app, settings and :class:`~goatbeat_celery.api.Schedules` the Django app uses.

goatbeat's settings are read from Django's settings the way Celery's Django guide has the
project's app read them (``config_from_object("django.conf:settings", namespace="CELERY")``):
through an app of our own, since a web process need not have imported the project's, and
Celery's current app is kept per thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import Celery

from goatbeat_celery import config as config_module
from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.store import django_databases as databases
from goatbeat_celery.store.url import mask_url

NAMESPACE = "CELERY"
#: The name of the Celery app goatbeat's Django app reads the settings with.
OWN_APP = "goatbeat_django"


def celery_app() -> Any:
    """A Celery app configured from Django's settings under the ``CELERY_`` namespace."""
    from goatbeat_celery.worker.tracking import tracks_runs

    app = Celery(OWN_APP, set_as_current=False, fixups=[])
    app.config_from_object("django.conf:settings", namespace=NAMESPACE)
    # The project's app, which proj/__init__.py loads with Django, calls track_runs(app):
    # its CELERY_GOATBEAT_TRACK_RUNS holds for this app too, unless the settings say.
    if app.conf.get("goatbeat_track_runs") is None and tracks_runs():
        app.conf.goatbeat_track_runs = True
    return app


def goatbeat_config() -> config_module.LoadedConfig:
    """goatbeat's validated settings; raises ConfigurationError listing every problem."""
    return config_module.load(celery_app(), with_schedules=False)


@contextmanager
def schedules(actor: str | None = None) -> Iterator[Schedules]:
    """The Schedules API on goatbeat's database, its changes made by ``actor`` in the audit
    log (None: this process's OS user; the admin names the signed-in user,
    :func:`django_actor`), closed afterwards."""
    app = celery_app()
    with Schedules.from_app(app, actor=actor) as opened:
        yield opened


def django_actor(request: Any) -> str:
    """``django:<username>``: the admin's user, as the audit log names who made a change."""
    user = getattr(request, "user", None)
    name = user.get_username() if user is not None and user.is_authenticated else ""
    return f"django:{name or 'anonymous'}"


def database_alias() -> str | None:
    """The ``DATABASES`` alias of goatbeat's database, which the admin reads its lists from;
    None when goatbeat's database is none of them (or its settings are invalid)."""
    from django.conf import settings

    try:
        url = goatbeat_config().config.database_url
    except ConfigurationError:
        return None
    return databases.alias_for(url, settings.DATABASES)


def masked_database_url() -> str:
    """goatbeat's database URL with the password hidden, for messages."""
    return mask_url(goatbeat_config().config.database_url)


def unknown_task_warning(task: str) -> str | None:
    """The warning ``celery goatbeat add`` gives for a task the project's Celery app does not
    know (goatbeat_celery.tasknames), judged against every Celery app of this process but
    goatbeat's own (the project's, which proj/__init__.py loads); None when it is known, or
    when no app with tasks of its own is loaded here, or its task modules fail to import:
    nothing to compare with."""
    from celery import _state

    from goatbeat_celery.tasknames import registered_tasks
    from goatbeat_celery.tasknames import unknown_task_warning as warning_for

    apps = [app for app in _state._get_active_apps() if app.main != OWN_APP]
    try:
        known = registered_tasks(apps)
    except Exception:  # the project's own modules: their errors are shown where they run
        return None
    if not any(not name.startswith("celery.") for name in known):
        return None
    return warning_for(task, known, "the project's Celery app")
