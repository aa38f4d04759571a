"""Backfills: the form starting one for a schedule (previewed first), a backfill's page with
its cancel button, and the list of them."""

from __future__ import annotations

import functools
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.core.rules.backfill import BackfillMode
from goatbeat_celery.core.types.errors import ConfigurationError, ScheduleConflict
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

BACKFILL_FIELDS = ("name", "start", "end", "mode", "newest_first")
PREVIEW_SHOWN = 200


async def backfill_form(request: Request, context: Context, *,
                        state: forms.FormState | None = None, preview: Any = None,
                        status_code: int = 200) -> Response:
    name = request.query_params.get("name", "") if state is None else state.values["name"]
    schedule = await call(context.schedules.get, name)
    zone = display.zone_of(schedule.spec.trigger) or context.schedules.default_timezone
    if state is None:
        state = forms.FormState({"name": name, "start": "", "end": "", "mode": "missing",
                                 "newest_first": "", "timezone": zone})
    return render(request, context, "backfill_new.html", status_code=status_code, s=schedule,
                  form=state, preview=preview, zone=zone, shown=PREVIEW_SHOWN,
                  modes=[mode.value for mode in BackfillMode])


def _backfill_keywords(state: forms.FormState) -> dict[str, Any] | None:
    values = state.values
    zone = values.get("timezone") or "UTC"
    start = forms.read_instant(values.get("start", ""), zone, state, "start")
    end = forms.read_instant(values.get("end", ""), zone, state, "end")
    if start is None or end is None:
        return None
    return {"start": start, "end": end, "mode": values.get("mode", ""),
            "newest_first": values.get("newest_first") == "on"}


async def backfill_start(request: Request, context: Context, form: FormData) -> Response:
    """Preview (a dry run, nothing stored) unless the form is the preview's confirmation."""
    name = text(form, "name")
    schedule = await call(context.schedules.get, name)
    zone = display.zone_of(schedule.spec.trigger) or context.schedules.default_timezone
    state = forms.FormState({"name": name, "timezone": zone,
                             **{key: text(form, key).strip() for key in BACKFILL_FIELDS[1:]}})
    keywords = _backfill_keywords(state)
    confirmed = text(form, "confirm") == "start"
    preview = None
    if keywords is not None:
        try:
            if confirmed:
                backfill = await call(context.schedules.backfill, name, **keywords)
                return redirect(request, "backfill", id=backfill.id, notice="backfill")
            preview = await call(functools.partial(context.schedules.backfill, name,
                                                   **keywords, dry_run=True))
        except ConfigurationError as exc:
            for problem in exc.details:
                state.add(problem.root if problem.root in BACKFILL_FIELDS else forms.GENERAL,
                          problem.text)
    return await backfill_form(request, context, state=state, preview=preview,
                               status_code=422 if state.errors else 200)


async def backfill_page(request: Request, context: Context, *, identifier: int | None = None,
                        refusal: str | None = None, status_code: int = 200) -> Response:
    if identifier is None:
        identifier = count(request.query_params.get("id", ""))
    backfill = await call(context.schedules.get_backfill, identifier)
    # A row edited by hand is shown as it reads: what became of its runs cannot be judged.
    outcomes = (None if backfill.damage else
                await call(context.schedules.backfill_outcomes, identifier))
    now = await call(context.schedules.now)
    return render(request, context, "backfill.html", status_code=status_code, b=backfill,
                  o=outcomes, now=now, zone=context.schedules.default_timezone,
                  notice=notice(request), refusal=refusal)


async def backfill_rerun(request: Request, context: Context, form: FormData) -> Response:
    """Run the failed occurrences again; refused on the backfill's page with the reason."""
    identifier = count(text(form, "id"))
    try:
        await call(functools.partial(context.schedules.rerun_failed, identifier,
                                     reason=text(form, "reason") or None))
    except (ConfigurationError, ScheduleConflict) as exc:
        said = ("; ".join(exc.problems) if isinstance(exc, ConfigurationError) else str(exc))
        return await backfill_page(request, context, identifier=identifier, refusal=said,
                                   status_code=409 if isinstance(exc, ScheduleConflict) else 422)
    return redirect(request, "backfill", id=identifier, notice="rerun")


async def backfill_cancel(request: Request, context: Context, form: FormData) -> Response:
    identifier = count(text(form, "id"))
    await call(context.schedules.cancel_backfill, identifier)
    return redirect(request, "backfill", id=identifier, notice="cancelled")


async def backfill_list(request: Request, context: Context) -> Response:
    found = await call(functools.partial(context.schedules.backfills, limit=100))
    now = await call(context.schedules.now)
    return render(request, context, "backfills.html", found=found, now=now,
                  zone=context.schedules.default_timezone)
