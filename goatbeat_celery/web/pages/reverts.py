"""Reverting a recorded edit: the confirmation page (each field before the edit, after it and
now) and the action that applies it, refused on the same page with the reason."""

from __future__ import annotations

import functools

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery.core.types.errors import ConfigurationError, ScheduleConflict
from goatbeat_celery.web.pages.base import Context, call, count, redirect, render, text
from goatbeat_celery.web.pages.schedule import read_only_reason


async def revert_page(request: Request, context: Context, *, refusal: str | None = None,
                      identifier: int | None = None, status_code: int = 200) -> Response:
    if identifier is None:
        identifier = count(request.query_params.get("id", ""))
    preview = await call(context.schedules.revert_preview, identifier)
    schedule = await call(context.schedules.get, preview.entry.schedule_name)
    return render(request, context, "revert.html", status_code=status_code, p=preview,
                  e=preview.entry, s=schedule, locked=read_only_reason(schedule),
                  refusal=refusal or preview.refusal)


async def revert(request: Request, context: Context, form: FormData) -> Response:
    identifier = count(text(form, "id"))
    entry = await call(context.schedules.audit_entry, identifier)
    schedule = await call(context.schedules.get, entry.schedule_name)
    locked = read_only_reason(schedule)
    if locked:
        return await revert_page(request, context, refusal=locked, identifier=identifier,
                                 status_code=422)
    if text(form, "confirm") != "revert":
        # Only the confirmation page's button reverts: any other post is asked to confirm.
        return redirect(request, "revert_confirm", id=identifier)
    try:
        await call(functools.partial(context.schedules.revert, identifier,
                                     reason=text(form, "reason") or None))
    except ConfigurationError as exc:
        return await revert_page(request, context, refusal="; ".join(exc.problems),
                                 identifier=identifier, status_code=422)
    except ScheduleConflict as exc:
        return await revert_page(request, context, refusal=str(exc), identifier=identifier,
                                 status_code=409)
    return redirect(request, "schedule", name=entry.schedule_name, notice="reverted")
