"""Runs across schedules (``/runs``): every schedule's runs, newest first, filtered by outcome,
schedule, tag, worker, time range and text, one page at a time (keyset paging); and the grid
of schedules by their latest runs (``/runs/grid``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.api import records
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.listing import ScheduleOrder
from goatbeat_celery.core.types.run_query import RunCursor, RunQuery, RunScan
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.web.pages.base import Context, call, count, link, render

#: Runs per page of the list.
PAGE_SIZE = 50
#: Schedules per page of the grid, and the runs shown for each.
GRID_SCHEDULES = 50
GRID_RUNS = 20
#: The time ranges offered beside a free ``since``: the last hour, day or week.
RANGES = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}
#: The query parameters of a search, as its links carry them.
FILTERS = ("outcome", "schedule", "tag", "worker", "range", "since", "until", "q")


@dataclass(frozen=True)
class _Search:
    """A search as the page reads it: its query, the filters to carry in its links (as
    given, cleaned), and why a filter given was not applied."""

    query: RunQuery
    filters: dict[str, str]
    problems: list[str]


def _instant(text: str, name: str, problems: list[str]) -> datetime | None:
    """An ISO-8601 instant of the form (UTC when it gives no offset), or None."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        problems.append(f"{name}: {text!r} is not an ISO-8601 instant, ignored")
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def read_search(query: Mapping[str, str], now: datetime) -> _Search:
    """The search a page's query asks for, at database time ``now`` (for a range)."""
    filters = {name: query.get(name, "").strip() for name in FILTERS}
    problems: list[str] = []
    if filters["outcome"] not in display.RUN_STATUSES:
        filters["outcome"] = ""
    if filters["range"] not in RANGES:
        filters["range"] = ""
    since = _instant(filters["since"], "since", problems)
    until = _instant(filters["until"], "until", problems)
    if filters["range"]:
        since = max(since, now - RANGES[filters["range"]]) if since else (
            now - RANGES[filters["range"]])
    outcome = filters["outcome"]
    return _Search(query=RunQuery(
        outcomes=frozenset({outcome}) if outcome else None,
        schedule_name=filters["schedule"] or None, tag=filters["tag"] or None,
        worker=filters["worker"] or None, since=since, until=until,
        text=filters["q"] or None), filters=filters, problems=problems)


def _cursor(query: Mapping[str, str]) -> RunCursor | None:
    """Where the previous page ended, from the link to this one (none when unreadable)."""
    key = query.get("before_key", "")
    try:
        at = datetime.fromisoformat(query.get("before", ""))
    except ValueError:
        return None
    if not key or at.tzinfo is None:
        return None  # the links this page makes carry an offset: this one was not made here
    return RunCursor(at, key)


def _search(context: Context, query: Mapping[str, str]
            ) -> tuple[_Search, RunScan, datetime]:
    schedules = context.schedules
    now = schedules.now()
    search = read_search(query, now)
    return search, schedules.search_runs(search.query, before=_cursor(query),
                                         limit=PAGE_SIZE + 1), now


async def run_list(request: Request, context: Context) -> Response:
    query = request.query_params
    search, (found, stopped_at), now = await call(_search, context, query)
    page = count(query.get("page", "")) if _cursor(query) else 0
    kept = {name: value for name, value in search.filters.items() if value}
    # A full page goes on from its last run; a text search cut short by the runs it may read,
    # from where that read stopped.
    more = found[PAGE_SIZE - 1] if len(found) > PAGE_SIZE else stopped_at
    return render(
        request, context, "runs.html", found=found[:PAGE_SIZE], filters=search.filters,
        problems=search.problems, statuses=display.RUN_STATUSES, ranges=tuple(RANGES),
        now=now, zone=context.schedules.default_timezone, page=page, page_size=PAGE_SIZE,
        first=link(request, "runs", **kept) if page or _cursor(query) else None,
        next=(link(request, "runs", **kept, before=more.occurrence_at.isoformat(),
                   before_key=more.key, page=page + 1) if more is not None else None),
        stopped_at=stopped_at, scanned=records.TEXT_SCAN,
        grid=link(request, "run_grid", tag=search.filters["tag"]),
    )


def _grid(context: Context, tag: str, after: str | None
          ) -> tuple[list[Schedule], dict[str, list[Execution]], bool, datetime]:
    api = context.schedules
    listed = api.list(limit=GRID_SCHEDULES + 1, order=ScheduleOrder.NAME, after=after or None,
                      tags=(tag,) if tag else ())
    shown = listed[:GRID_SCHEDULES]
    latest = api.latest_runs([s.name for s in shown], GRID_RUNS)
    return shown, latest, len(listed) > GRID_SCHEDULES, api.now()


async def run_grid(request: Request, context: Context) -> Response:
    query = request.query_params
    tag = query.get("tag", "").strip()
    after = query.get("after", "")
    page = count(query.get("page", "")) if after else 0
    shown, latest, more, now = await call(_grid, context, tag, after)
    return render(
        request, context, "run_grid.html", shown=shown, latest=latest, tag=tag, now=now,
        zone=context.schedules.default_timezone, per_schedule=GRID_RUNS, page=page,
        page_size=GRID_SCHEDULES,
        first=link(request, "run_grid", tag=tag) if after else None,
        next=(link(request, "run_grid", tag=tag, after=shown[-1].name, page=page + 1)
              if more and shown else None),
    )
