"""The list of schedules (``/schedules``): filtered by name prefix, source, state and tag,
sorted by name or next run, one page at a time."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.api.bulk import MAX_BULK
from goatbeat_celery.core.types.execution import Execution, idempotency_key
from goatbeat_celery.core.types.listing import RunOrderCursor, ScheduleOrder
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSource
from goatbeat_celery.web.pages.base import Context, call, count, link, render, session

#: Schedules per page of the list.
PAGE_SIZE = 50
STATES = ("enabled", "paused", "set-aside")
#: The query a page of the list is read from: what a bulk action's redirect keeps.
LIST_QUERY = ("q", "source", "state", "tag", "sort", "after", "after_run", "page")


def _list_page(context: Context, prefix: str, source: ScheduleSource | None, state: str,
               tag: str, order: ScheduleOrder, after: str | RunOrderCursor | None,
               ) -> tuple[list[Schedule], bool]:
    """One page of schedules in ``order``, after the last one of the previous page (keyset
    paging: as fast on the last page as on the first)."""
    filters: dict[str, Any] = {"prefix": prefix or None, "source": source,
                               "tags": (tag,) if tag else ()}
    if state == "enabled":
        filters.update(enabled=True, set_aside=False)
    elif state == "paused":
        filters["enabled"] = False
    elif state == "set-aside":
        filters["set_aside"] = True
    found = context.schedules.list(limit=PAGE_SIZE + 1, order=order, after=after, **filters)
    return found[:PAGE_SIZE], len(found) > PAGE_SIZE


def _last_runs(context: Context, found: list[Schedule]) -> dict[str, Execution]:
    """The execution of each schedule's last occurrence, by schedule name: one read by key for
    the whole page (a run now is not an occurrence, so it is not the one shown)."""
    keys = {idempotency_key(s.name, s.last_occurrence_at): s.name for s in found
            if s.last_occurrence_at is not None}
    if not keys:
        return {}
    runs = context.schedules.executions_by_key(keys)
    return {keys[key]: run for key, run in runs.items()}


def _next_runs(context: Context, found: list[Schedule], now: datetime,
               ) -> dict[str, datetime | None]:
    """The next run of each schedule that shows one, by name, as its page's card gives it
    (``Schedules.next_runs``): a run its calendars exclude, its bounds or a pause with an end
    put off is not the stored next occurrence. Only those are computed: for the others
    ``next_runs`` starts and stops at the stored next occurrence."""
    found_next: dict[str, datetime | None] = {}
    for schedule in found:
        if display.next_run_text(schedule, now) == display.NONE:
            continue
        spec = schedule.spec
        if not (spec.calendars or spec.start_at or spec.end_at or schedule.paused_until):
            found_next[schedule.name] = schedule.next_run_at
            continue
        try:
            runs = context.schedules.next_runs(schedule.name, 1)
        # A schedule is a failure domain: one whose trigger cannot be built here shows the
        # stored instant, as the list did.
        except Exception:  # noqa: BLE001
            runs = [schedule.next_run_at] if schedule.next_run_at else []
        found_next[schedule.name] = runs[0] if runs else None
    return found_next


def _cursor(order: ScheduleOrder, query: Mapping[str, str]) -> str | RunOrderCursor | None:
    """Where the previous page ended, from the link to this one (none when unreadable)."""
    name = query.get("after", "")
    if not name:
        return None
    if order is ScheduleOrder.NAME:
        return name
    at = query.get("after_run", "")
    try:
        instant = datetime.fromisoformat(at) if at else None
    except ValueError:
        return None
    if instant is not None and instant.tzinfo is None:
        return None  # the links this page makes carry an offset: this one was not made here
    return RunOrderCursor(next_run_at=instant, name=name)


def _next_link(request: Request, filters: Mapping[str, str], order: ScheduleOrder,
               last: Schedule, page: int) -> str:
    cursor: dict[str, str] = {"after": last.name}
    if order is ScheduleOrder.NEXT_RUN:
        cursor["after_run"] = "" if last.next_run_at is None else last.next_run_at.isoformat()
    return link(request, "schedules", **filters, **cursor, page=page + 1)


def _tagged_count(context: Context, tag: str) -> int:
    """How many schedules carry ``tag``, counted up to one more than a bulk action takes."""
    return len(context.schedules.list(tags=(tag,), limit=MAX_BULK + 1)) if tag else 0


async def schedule_list(request: Request, context: Context, *, status_code: int = 200,
                        **bulk: Any) -> Response:
    """The list; ``bulk``: why a bulk action was refused (``bulk_errors``), with what was
    typed in its bar (``bulk_form``). What one did is read by the id its redirect gave
    (``?bulk=``): ``bulk_gone`` when this process holds it no more."""
    query = request.query_params
    bulk_key = query.get("bulk", "")
    bulk_result = (context.bulk_results.get(bulk_key, session(request, context))
                   if bulk_key else None)
    prefix = query.get("q", "")
    source_text = query.get("source", "")
    source = ScheduleSource(source_text) if source_text in ("config", "api") else None
    state = query.get("state", "")
    state = state if state in STATES else ""
    order = (ScheduleOrder.NEXT_RUN if query.get("sort") == ScheduleOrder.NEXT_RUN.value
             else ScheduleOrder.NAME)
    after = _cursor(order, query)
    page = count(query.get("page", "")) if after else 0
    tag = query.get("tag", "").strip()
    found, more = await call(_list_page, context, prefix, source, state, tag, order, after)
    last_runs = await call(_last_runs, context, found)
    # The state of a pause with an end depends on the time: judged by the database clock.
    now = await call(context.schedules.now)
    next_runs = await call(_next_runs, context, found, now)
    filters = {"q": prefix, "source": source.value if source else "", "state": state,
               "tag": tag, "sort": order.value}
    tagged = await call(_tagged_count, context, tag)
    return render(
        request, context, "schedules.html", status_code=status_code, found=found,
        filters=filters, states=STATES, tagged=tagged, max_bulk=MAX_BULK,
        bulk_result=bulk_result, bulk_gone=bool(bulk_key) and bulk_result is None,
        bulk_errors=bulk.get("bulk_errors", {}),
        bulk_form=bulk.get("bulk_form", {}), selected=set(bulk.get("selected", ())),
        first=link(request, "schedules", **filters) if after else None,
        next=(_next_link(request, filters, order, found[-1], page) if more and found
              else None),
        page=page, page_size=PAGE_SIZE, now=now, last_runs=last_runs, next_runs=next_runs,
        default_zone=context.schedules.default_timezone,
    )
