"""The form making a schedule (``/new``) and what it posts."""

from __future__ import annotations

import functools

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery.core.types.errors import ConfigurationError, ScheduleConflict
from goatbeat_celery.web import forms
from goatbeat_celery.web.pages.base import Context, call, refusal, render
from goatbeat_celery.web.pages.schedule import back_to, form_choices


async def new_page(request: Request, context: Context, *,
                   state: forms.FormState | None = None, status_code: int = 200) -> Response:
    if context.settings.read_only:
        return refusal(request, context, 403, "Read-only",
                       "This dashboard was started read-only: it shows no forms and creates "
                       "nothing.")
    if state is None:
        state = forms.FormState(_blank_values(context))
    return render(request, context, "new.html", status_code=status_code, form=state,
                  **form_choices(context))


def _blank_values(context: Context) -> dict[str, str]:
    return {**dict.fromkeys(forms.FIELDS, ""), "kind": "every",
            "timezone": context.schedules.default_timezone, "args": "[]", "kwargs": "{}",
            "options": "{}", "mode": "fixed_rate"}


async def create(request: Request, context: Context, form: FormData) -> Response:
    state = forms.FormState({**_blank_values(context), **forms.typed_values(form)})
    values = state.values
    trigger = forms.trigger_keywords(state, context.schedules.default_timezone)
    call_keywords = forms.call_keywords(state)
    policies = {key: value for key, value in
                forms.policy_keywords(state, context.schedules.default_timezone).items()
                if value not in (None, [])}
    if not state.errors:
        try:
            await call(functools.partial(
                context.schedules.create, values["name"], values["task"], **trigger,
                **call_keywords, **policies, enabled=form.get("paused") is None))
        except ConfigurationError as exc:
            state.add_problems(exc.details)
        except ScheduleConflict as exc:
            state.add("name", str(exc))
    if state.errors:
        return await new_page(request, context, state=state, status_code=422)
    return back_to(request, values["name"], "created")
