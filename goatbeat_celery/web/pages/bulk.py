"""What the schedules list's action bar posts (``/schedules/bulk``): pause (optionally until
an instant), resume or run now the schedules ticked, or every schedule carrying the tag the
list is filtered by, with one reason recorded in the audit log for each. A post taken answers
See Other to the list (its filters kept) with ``bulk=<id>``, whose page shows each schedule's
outcome (done, or refused and why) above it, so a reload shows it again and acts on nothing;
a post refused whole (nothing ticked, a bad ``until``) shows the problems in the bar and
changes nothing."""

from __future__ import annotations

import functools

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery.api.bulk import BULK_ACTIONS
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.web import forms
from goatbeat_celery.web.pages.base import Context, call, redirect, session, text
from goatbeat_celery.web.pages.schedule_list import LIST_QUERY, schedule_list

#: Where each problem of a refused post is shown: the bar's fields, else above it.
_BAR_FIELDS = {"names": "names", "tag": "names", "until": "until", "reason": "reason",
               "note": "reason", "action": "action"}


async def bulk_action(request: Request, context: Context, form: FormData) -> Response:
    action = text(form, "action")
    names = [name for name in form.getlist("names") if isinstance(name, str)]
    tag = text(form, "all_tagged") or None
    reason = text(form, "reason").strip() or None
    typed = {"reason": text(form, "reason"), "until": text(form, "until"),
             "all_tagged": text(form, "all_tagged")}
    state = forms.FormState(typed)
    until_text = typed["until"].strip()
    until = None
    if action not in BULK_ACTIONS:
        state.add("action", "choose pause, resume or run now")
    elif until_text and action != "pause":
        state.add("until", "until: is for a pause only; clear it to "
                           f"{action.replace('_', ' ')}")
    elif until_text:
        until = forms.read_instant(until_text, context.schedules.default_timezone, state,
                                   "until")
    result = None
    if not state.errors:
        try:
            # With every schedule of the tag ticked, the boxes of this page are that tag's.
            result = await call(functools.partial(
                context.schedules.bulk, action, None if tag else names, tag=tag, until=until,
                note=reason if action == "pause" else None, reason=reason))
        except ConfigurationError as exc:
            for problem in exc.details:
                state.add(_BAR_FIELDS.get(problem.root, "action"), problem.text)
    if state.errors:
        return await schedule_list(request, context, status_code=422,
                                   bulk_errors=state.errors, bulk_form=typed, selected=names)
    assert result is not None  # taken: no problem was found
    key = context.bulk_results.keep(result, session(request, context))
    # Back to the list as it was filtered (the bar posts with the list's query).
    kept = {k: v for k, v in request.query_params.items() if k in LIST_QUERY}
    return redirect(request, "schedules", **kept, bulk=key)
