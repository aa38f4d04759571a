"""The overview (``/``): the lease and its leader, the schedules set aside, the oldest
occurrence waiting, the open alerts and the lateness chart; and the fleet (``/fleet``): every
shard's lease and every replica."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery import display
from goatbeat_celery.core.rules.alerts import Alert
from goatbeat_celery.core.rules.shards import Replica, Shard, shard_lease_name
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.lease import LeaseInfo
from goatbeat_celery.core.types.listing import ScheduleCounts
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.store.url import mask_url
from goatbeat_celery.web.chart import Chart, lateness_chart
from goatbeat_celery.web.pages.base import Context, call, notice, render

#: Executions read for the overview's chart, newest first.
CHART_EXECUTIONS = 500
#: Alerts the overview lists (open ones) and a schedule's page (open, then the last resolved).
ALERTS_SHOWN = 20


@dataclass(frozen=True)
class _Overview:
    lease: LeaseInfo | None
    now: datetime
    pending: Execution | None
    set_aside: list[Schedule]
    counts: ScheduleCounts
    chart: Chart
    #: With shards, every lease row of the sharding; None with one shard.
    sharding: list[LeaseInfo] | None = None
    #: The live replicas leading nothing.
    standbys: list[Replica] = field(default_factory=list)
    #: The open alerts (at most ALERTS_SHOWN + 1, to know there are more).
    alerts: list[Alert] = field(default_factory=list)


def _read_overview(context: Context) -> _Overview:
    schedules = context.schedules
    info = schedules.lease()  # shard 0's: context.lease_name
    now = schedules.now()

    counts = schedules.counts()
    set_aside = schedules.list(set_aside=True, limit=display.SET_ASIDE_SHOWN + 1)
    recent = schedules.executions(limit=CHART_EXECUTIONS)
    settings = schedules.config.settings
    # The member rows of every replica, and with several shards the shards' rows.
    rows = schedules.leases()
    return _Overview(info, now, schedules.oldest_pending(), set_aside, counts,
                     lateness_chart(recent, now, limit=CHART_EXECUTIONS),
                     None if settings.shards == 1 else rows,
                     display.standby_replicas(rows, info, settings),
                     schedules.alerts(open_only=True, limit=ALERTS_SHOWN + 1))


async def overview(request: Request, context: Context) -> Response:
    data = await call(_read_overview, context)
    info = data.lease
    settings = context.schedules.config.settings
    return render(
        request, context, "overview.html", data=data, lease_name=context.lease_name,
        notice=notice(request),
        lease=info, held=info is not None and info.held,
        renewal=display.lease_health_parts(info, settings),
        silent=info is not None and info.silent(settings.lease_ttl,
                                                settings.lease_renew_interval),
        database=mask_url(context.schedules.config.database_url),
        shown=display.SET_ASIDE_SHOWN, zone=context.schedules.default_timezone,
        alerts_shown=ALERTS_SHOWN, alerts_note=display.untracked_rules_note(settings),
        standbys=display.standbys_line(data.standbys, data.now),
        shards=(None if data.sharding is None
                else display.shard_holders(data.sharding, settings)),
        members=(None if data.sharding is None
                 else display.shard_members_line(data.sharding, settings)),
        pending_lag=None if data.pending is None else pending_lateness(data.pending, data.now),
    )


def pending_lateness(pending: Execution, now: datetime) -> str:
    """How late the oldest pending run is: ``1.2s late``, or ``on time`` while it is not yet
    due (a run claimed ahead of its due instant) or due this very moment."""
    late = (now - pending.due_at).total_seconds()
    return "on time" if late <= 0 else f"{display.human_seconds(late)} late"


@dataclass(frozen=True)
class _Fleet:
    lease: LeaseInfo | None
    now: datetime
    #: Every lease row of the sharding prefix: the shards' and the replicas' member rows.
    members: list[LeaseInfo]
    standbys: list[Replica]


def _read_fleet(context: Context) -> _Fleet:
    """The lease rows only: the fleet page reads nothing of the schedules."""
    settings = context.schedules.config.settings
    info = context.schedules.lease()  # shard 0's: context.lease_name
    rows = context.schedules.leases()
    return _Fleet(info, context.schedules.now(), rows,
                  display.standby_replicas(rows, info, settings))


async def fleet(request: Request, context: Context) -> Response:
    data = await call(_read_fleet, context)
    settings = context.schedules.config.settings
    by_name = {row.name: row for row in data.members}
    if data.lease is not None:
        by_name[data.lease.name] = data.lease
    shards = []
    for k in range(settings.shards):
        name = shard_lease_name(settings.lease_name, Shard(k, settings.shards))
        shards.append((k, name, by_name.get(name)))
    names = {name for _k, name, _row in shards}
    replicas = sorted((row for row in data.members
                       if row.name not in names and row.holder is not None),
                      key=lambda row: row.holder or "")
    leaders = {row.holder for _k, _n, row in shards if row is not None and row.held}
    return render(
        request, context, "fleet.html", now=data.now, shards=shards, replicas=replicas,
        leaders=leaders, standbys={r.holder for r in data.standbys},
        ttl=settings.lease_ttl, renew=settings.lease_renew_interval,
        zone=context.schedules.default_timezone,
    )
