"""Exclusion calendars: their list with the form making one, a calendar's page with its edit
form, and its removal (with its confirmation page)."""

from __future__ import annotations

import functools
from urllib.parse import urlencode

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.core.types.errors import (
    CalendarInUse,
    ConfigurationError,
    ScheduleConflict,
)
from goatbeat_celery.web import forms
from goatbeat_celery.web.pages.base import (
    Context,
    call,
    count,
    notice,
    redirect,
    render,
    text,
)


async def calendar_list(request: Request, context: Context, *,
                        state: forms.FormState | None = None,
                        status_code: int = 200) -> Response:
    found = await call(context.schedules.list_calendars)
    now = await call(context.schedules.now)
    return render(request, context, "calendars.html", status_code=status_code, found=found,
                  entries=display.calendar_entries, now=now,
                  zone=context.schedules.default_timezone, notice=notice(request),
                  form=state or forms.FormState(dict.fromkeys(forms.CALENDAR_FIELDS, "")))


async def calendar_create(request: Request, context: Context, form: FormData) -> Response:
    state = forms.FormState({key: text(form, key).strip() for key in forms.CALENDAR_FIELDS})
    name = state.values["name"]
    try:
        await call(functools.partial(context.schedules.create_calendar, name,
                                     **forms.calendar_keywords(state)))
    except ConfigurationError as exc:
        forms.add_calendar_problems(state, exc.details)
    except ScheduleConflict as exc:  # the name is taken
        state.add("name", str(exc))
    if state.errors:
        return await calendar_list(request, context, state=state, status_code=422)
    return redirect(request, "calendar", name=name, notice="calendar")


async def calendar_page(request: Request, context: Context, *,
                        state: forms.FormState | None = None,
                        status_code: int = 200) -> Response:
    name = request.query_params.get("name", "") if state is None else state.values["name"]
    calendar = await call(context.schedules.get_calendar, name)
    observing = await call(context.schedules.observing, name)
    entries = display.calendar_entries(calendar)
    now = await call(context.schedules.now)
    return render(request, context, "calendar.html", status_code=status_code, c=calendar,
                  observing=observing, entries=entries, now=now,
                  zone=context.schedules.default_timezone, notice=notice(request),
                  form=state or forms.FormState(forms.calendar_values(
                      entries, calendar.description, calendar.name)))


async def calendar_edit(request: Request, context: Context, form: FormData) -> Response:
    state = forms.FormState({key: text(form, key).strip() for key in forms.CALENDAR_FIELDS})
    name = state.values["name"]
    version = text(form, "version")
    try:
        await call(functools.partial(
            context.schedules.update_calendar, name, **forms.calendar_keywords(state),
            expected_version=count(version) if version else None))
    except ConfigurationError as exc:
        forms.add_calendar_problems(state, exc.details)
    except ScheduleConflict as exc:  # changed since the page was read
        state.add(forms.GENERAL, str(exc))
    if state.errors:
        request.scope["query_string"] = urlencode({"name": name}).encode()
        return await calendar_page(request, context, state=state, status_code=422)
    return redirect(request, "calendar", name=name, notice="calendar")


async def calendar_delete_page(request: Request, context: Context, *,
                               name: str | None = None, refused: str | None = None,
                               status_code: int = 200) -> Response:
    """The confirmation a calendar's removal asks for; while schedules observe it, the reason
    it would be refused (the API's) instead of the button."""
    name = request.query_params.get("name", "") if name is None else name
    calendar = await call(context.schedules.get_calendar, name)
    observing = await call(context.schedules.observing, name)
    if refused is None and observing:
        refused = str(CalendarInUse(name, observing))
    return render(request, context, "calendar_delete.html", status_code=status_code,
                  c=calendar, observing=observing, refused=refused)


async def calendar_delete(request: Request, context: Context, form: FormData) -> Response:
    name = text(form, "name")
    if text(form, "confirm") != "remove":
        # Only the confirmation page's button removes: any other post is asked to confirm.
        return redirect(request, "calendar_delete_confirm", name=name)
    try:
        await call(context.schedules.delete_calendar, name)
    except CalendarInUse as exc:  # a schedule took it up since the page was read
        return await calendar_delete_page(request, context, name=name, refused=str(exc),
                                          status_code=409)
    return redirect(request, "calendars", notice="calendar-removed")
