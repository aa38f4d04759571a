"""What an open alert's forms post, on the overview and a schedule's page: acknowledge it
(``/alert/ack``, a note) or silence it (``/alert/silence``, for a while or until an
instant). Each goes through ``Schedules`` (audited as the dashboard's actor) and leads back
to the page it came from; a refusal (a resolved alert, an end already past) is a page saying
why, with nothing changed."""

from __future__ import annotations

import functools
from datetime import timedelta

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery.core.types.errors import ConfigurationError, ScheduleConflict
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.web import forms
from goatbeat_celery.web.pages.base import Context, call, count, redirect, refusal, text

#: The silences the form offers (seconds), beside an end typed.
SILENCES = frozenset({3600, 14400, 86400, 604800})


def _back(request: Request, form: FormData, notice: str) -> Response:
    """Back to the page the form was on: a schedule's, or the overview."""
    name = text(form, "name")
    if text(form, "back") == "schedule" and name:
        return redirect(request, "schedule", name=name, notice=notice)
    return redirect(request, "overview", notice=notice)


def _refused(request: Request, context: Context, title: str, exc: Exception) -> Response:
    status = 409 if isinstance(exc, ScheduleConflict) else 422
    return refusal(request, context, status, title, f"{exc} Nothing was changed.")


async def acknowledge(request: Request, context: Context, form: FormData) -> Response:
    alert_id = count(text(form, "alert_id"))
    note = text(form, "note").strip() or None
    try:
        await call(functools.partial(context.schedules.acknowledge_alert, alert_id, note=note))
    except (ConfigurationError, ScheduleConflict) as exc:
        return _refused(request, context, "Not acknowledged", exc)
    return _back(request, form, "acknowledged")


async def silence(request: Request, context: Context, form: FormData) -> Response:
    alert_id = count(text(form, "alert_id"))
    typed = text(form, "until").strip()
    state = forms.FormState({"until": typed})
    if typed:
        until = forms.read_instant(typed, context.schedules.default_timezone, state, "until")
    else:
        seconds = count(text(form, "for"))
        if seconds not in SILENCES:
            state.add("until", "until: choose how long, or type when the silence ends")
            until = None
        else:
            # To the second: an end people read, not the instant the button was pressed.
            now = await call(context.schedules.now)
            until = now.replace(microsecond=0) + timedelta(seconds=seconds)
    try:
        if until is None:
            # The form's messages lead with their field, which the Problem names instead.
            raise ConfigurationError([Problem(name, said.removeprefix(f"{name}: "))
                                      for name, saids in state.errors.items()
                                      for said in saids],
                                     subject=f"alert {alert_id}")
        await call(functools.partial(context.schedules.silence_alert, alert_id, until=until))
    except (ConfigurationError, ScheduleConflict) as exc:
        return _refused(request, context, "Not silenced", exc)
    return _back(request, form, "silenced")
