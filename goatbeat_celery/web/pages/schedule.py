"""A schedule's page (``/schedule``): its definition and edit form, next runs, history with
its runtimes and outcomes, backfills, alerts and changes; and what its buttons post: pause,
resume, run now, edit and remove (with its confirmation page)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.core.rules.alerts import Alert
from goatbeat_celery.core.rules.backfill import Backfill
from goatbeat_celery.core.rules.sync import config_row_refusal
from goatbeat_celery.core.types.audit import AuditEntry
from goatbeat_celery.core.types.errors import ConfigurationError, ScheduleConflict
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.web import forms, present
from goatbeat_celery.web.chart import Chart, lateness_chart
from goatbeat_celery.web.pages.base import Context, call, count, notice, redirect, render, text
from goatbeat_celery.web.pages.overview import ALERTS_SHOWN
from goatbeat_celery.web.runtime_chart import RuntimeChart, runtime_chart

HISTORY_SHOWN = 50
#: The newest changes of a schedule its page shows (``celery goatbeat audit NAME`` pages on).
AUDIT_SHOWN = 20
#: Runs read for a schedule's page: its runtime percentiles and its filter by outcome look at
#: these (the newest), the table shows the first HISTORY_SHOWN that pass the filter.
RUNS_READ = 500
NEXT_RUNS_SHOWN = 5


@dataclass(frozen=True)
class _Detail:
    schedule: Schedule
    history: list[Execution]
    now: datetime
    upcoming: list[datetime]
    upcoming_problem: str | None
    chart: Chart
    #: The runtime of each of the runs read that reported one (the same RUNS_READ).
    trend: RuntimeChart
    #: The runs read (at most RUNS_READ, newest first) before the filter by outcome.
    read: int = 0
    #: How many of those runs are in each state (run_status), for the filter.
    outcomes: dict[str, int] = field(default_factory=dict)
    #: p50, p90, p99 and max runtime of the runs read that report one.
    runtimes: list[tuple[str, str]] = field(default_factory=list)
    measured: int = 0
    backfills: list[Backfill] = field(default_factory=list)
    #: Its open alerts, and the last few resolved.
    alerts: list[Alert] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)


def _upcoming(context: Context, schedule: Schedule) -> tuple[list[datetime], str | None]:
    """The next runs, as ``celery goatbeat next`` lists them (``Schedules.next_runs``); none
    for a schedule that will not run or awaits repair."""
    if not schedule.spec.enabled or schedule.next_occurrence_at is None or schedule.damage:
        return [], None
    try:
        return context.schedules.next_runs(schedule.name, NEXT_RUNS_SHOWN), None
    # A schedule is a failure domain: a trigger only beat can build is shown without its runs.
    except Exception as exc:  # noqa: BLE001
        return [], f"cannot compute ({type(exc).__name__}: {exc})"


def _read_detail(context: Context, name: str, outcome: str = "") -> _Detail:
    schedule = context.schedules.get(name)
    read = context.schedules.history(name, limit=RUNS_READ)
    now = context.schedules.now()
    runs, problem = _upcoming(context, schedule)
    outcomes: dict[str, int] = {}
    for execution in read:
        status = display.run_status(execution)
        outcomes[status] = outcomes.get(status, 0) + 1
    shown = [e for e in read if not outcome or display.run_status(e) == outcome]
    runtimes = [e.runtime.total_seconds() for e in read if e.runtime is not None]
    backfills = context.schedules.backfills(name=name, limit=10)
    alerts = context.schedules.alerts(name=name, limit=ALERTS_SHOWN)
    return _Detail(schedule, shown[:HISTORY_SHOWN], now, runs, problem,
                   lateness_chart(read, now, limit=RUNS_READ), runtime_chart(read, now),
                   read=len(read),
                   outcomes=outcomes, runtimes=present.percentiles(runtimes),
                   measured=len(runtimes), backfills=backfills, alerts=alerts,
                   audit=context.schedules.audit(name, limit=AUDIT_SHOWN))


def read_only_reason(schedule: Schedule) -> str | None:
    """Why the dashboard may not change ``schedule`` (a row of the configuration), as a
    sentence; None when it may."""
    refusal = config_row_refusal(schedule)  # the rule every face applies
    return None if refusal is None else refusal[0].upper() + refusal[1:] + "."


def form_choices(context: Context) -> dict[str, Any]:
    """What the schedule form's template needs beside its values: the choices of its lists and
    its plain fields, hinted with the settings standing in for them."""
    return {"kinds": forms.KINDS, "misfires": forms.MISFIRE_CHOICES,
            "overlaps": forms.OVERLAP_CHOICES, "modes": forms.MODE_CHOICES,
            "plain": forms.plain_groups(context.schedules.config.settings)}


async def schedule_page(request: Request, context: Context, *,
                        state: forms.FormState | None = None,
                        status_code: int = 200) -> Response:
    name = request.query_params.get("name", "")
    outcome = request.query_params.get("outcome", "")
    outcome = outcome if outcome in display.RUN_STATUSES else ""
    if state is not None:
        name = state.values["name"]
    detail = await call(_read_detail, context, name, outcome)
    schedule = detail.schedule
    if state is None:
        state = forms.FormState(forms.stored_values(schedule, context.schedules.default_timezone))
    return render(
        request, context, "schedule.html", status_code=status_code, s=schedule,
        detail=detail, form=state, notice=notice(request), locked=read_only_reason(schedule),
        fields=display.schedule_fields(schedule, context.schedules.config.settings, detail.now),
        **form_choices(context),
        outcome=outcome, statuses=display.RUN_STATUSES,
        # Each shown edit a shown revert undid → that revert's entry id.
        reverted={a.changes["reverts"][1]: a.id for a in detail.audit
                  if display.audit_action(a.action) == "revert" and "reverts" in a.changes},
        zone=display.zone_of(schedule.spec.trigger) or context.schedules.default_timezone,
        # The definition as this page shows it, sent back with an edit: a refusal because it
        # changed since can then say what changed.
        read=json.dumps(forms.stored_values(schedule, context.schedules.default_timezone)),
    )


def back_to(request: Request, name: str, notice: str) -> Response:
    """Back to the schedule's page, saying what was done (``notice``)."""
    return redirect(request, "schedule", name=name, notice=notice)


async def _action(request: Request, context: Context, form: FormData,
                  method: Callable[[str], Any], notice: str) -> Response:
    name = text(form, "name")
    try:
        await call(method, name)
    except (ConfigurationError, ScheduleConflict) as exc:
        state = forms.FormState(forms.stored_values(
            await call(context.schedules.get, name), context.schedules.default_timezone))
        state.add_refusal(exc)
        request.scope["query_string"] = urlencode({"name": name}).encode()
        return await schedule_page(request, context, state=state, status_code=422)
    return back_to(request, name, notice)


async def pause(request: Request, context: Context, form: FormData) -> Response:
    return await _action(request, context, form, context.schedules.pause, "paused")


async def resume(request: Request, context: Context, form: FormData) -> Response:
    return await _action(request, context, form, context.schedules.resume, "resumed")


async def run_now(request: Request, context: Context, form: FormData) -> Response:
    return await _action(request, context, form, context.schedules.run_now, "queued")


async def edit(request: Request, context: Context, form: FormData) -> Response:
    name = text(form, "name")
    current = await call(context.schedules.get, name)
    zone = context.schedules.default_timezone
    # Only what the person changed goes over the stored values: a field they left as they
    # read it never carries back a value someone else has saved since.
    own = forms.own_changes(forms.typed_values(form), forms.read_values(form))
    state = forms.FormState({**forms.stored_values(current, zone), **own, "name": name})
    locked = read_only_reason(current)
    if locked:
        state.add(forms.GENERAL, locked)
        return await schedule_page(request, context, state=state, status_code=422)
    trigger = forms.trigger_keywords(state, context.schedules.default_timezone)
    call_keywords = forms.call_keywords(state)
    policies = forms.policy_keywords(state, context.schedules.default_timezone)
    version = text(form, "version")
    if not state.errors:
        try:
            await call(functools.partial(
                context.schedules.update, name, **trigger, **call_keywords, **policies,
                expected_version=count(version) if version else None,
                reason=text(form, "reason") or None))
        except ScheduleConflict as exc:
            state = _refused_over_newer(name, own, exc, forms.read_values(form),
                                        await call(context.schedules.get, name), zone)
        except ConfigurationError as exc:
            state.add_refusal(exc)
    if state.errors:
        return await schedule_page(request, context, state=state, status_code=422)
    return back_to(request, name, "saved")


def _refused_over_newer(name: str, own: dict[str, str], exc: ScheduleConflict,
                        read: dict[str, str], newer: Schedule, zone: str) -> forms.FormState:
    """The form shown after an edit refused because the schedule was saved since it was read:
    the newer values, with the person's own changes (``own``) laid over them and marked, so
    that saving it again applies those changes only."""
    stored = forms.stored_values(newer, zone)
    state = forms.FormState({**stored, **own, "name": name})
    state.kept = {key for key, value in own.items() if key in stored and value != stored[key]}
    changed = display.changed_since_read(name, read, stored)
    if changed is None:
        state.add_refusal(exc)
    else:
        state.add(forms.GENERAL, changed)
    if state.kept:
        state.add(forms.GENERAL, "The form now shows the newer values, with your changes kept "
                                 "over them (marked): save again to apply only yours.")
    return state


async def delete_page(request: Request, context: Context) -> Response:
    """The confirmation a removal asks for: what goes, what stays, and the button that does
    it (a form posted with its CSRF token)."""
    name = request.query_params.get("name", "")
    schedule = await call(context.schedules.get, name)
    return render(request, context, "delete.html", s=schedule,
                  locked=read_only_reason(schedule))


async def delete(request: Request, context: Context, form: FormData) -> Response:
    name = text(form, "name")
    current = await call(context.schedules.get, name)
    locked = read_only_reason(current)
    if locked:
        state = forms.FormState(forms.stored_values(current, context.schedules.default_timezone))
        state.add(forms.GENERAL, locked)
        return await schedule_page(request, context, state=state, status_code=422)
    if text(form, "confirm") != "remove":
        # Only the confirmation page's button removes: any other post is asked to confirm.
        return redirect(request, "delete_confirm", name=name)
    try:
        await call(functools.partial(context.schedules.delete, name,
                                     reason=text(form, "reason") or None))
    except ConfigurationError as exc:
        state = forms.FormState(forms.stored_values(current, context.schedules.default_timezone))
        state.add_refusal(exc)
        return await schedule_page(request, context, state=state, status_code=422)
    return redirect(request, "schedules", notice="removed")
