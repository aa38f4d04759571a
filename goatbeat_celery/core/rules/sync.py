"""Config sync decisions, shared by every store so that they cannot disagree.

Config entries are upserted by name: an unchanged spec keeps its ``next_run_at`` (a restart never
resets or re-fires a schedule), a changed one is rescheduled, an entry gone from config is
disabled (not deleted), and rows created through the API are never touched. A schedule that
paused itself after failed runs stays paused while its entry is unchanged. With pruning on
(``goatbeat_config_prune``), a config row out of config and disabled is deleted once nothing
has written its definition for the grace period (``goatbeat_config_prune_grace``): its
``updated_at`` is when config sync disabled it, or when someone edited it since.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSource, SyncEntry, SyncReport, quoted_name


@dataclass(frozen=True, kw_only=True)
class StoredSummary:
    """The part of a stored row that config sync looks at."""

    spec_hash: str
    enabled: bool
    source: ScheduleSource
    #: The schedule paused itself after failed runs in a row (``paused_reason`` is set): an
    #: unchanged entry leaves it paused; a changed one (the fix) runs it again.
    paused: bool = False
    #: When the definition was last written (by config sync, or by an edit).
    updated_at: datetime | None = None


def stored_summary(schedule: Schedule) -> StoredSummary:
    """What config sync compares, judged from the row's content: a row whose spec_hash column
    was kept while its task was changed by hand is a changed row, rewritten from config."""
    spec_hash = "" if schedule.damage else schedule.spec.spec_hash()
    return StoredSummary(spec_hash=spec_hash, enabled=schedule.spec.enabled,
                         source=schedule.spec.source,
                         paused=schedule.paused_reason is not None,
                         updated_at=schedule.updated_at)


@dataclass(frozen=True, kw_only=True)
class SyncPlan:
    """Rows to insert, to rewrite (spec and times, version + 1), to disable and to delete."""

    insert: tuple[SyncEntry, ...]
    rewrite: tuple[SyncEntry, ...]
    disable: tuple[str, ...]
    report: SyncReport
    delete: tuple[str, ...] = ()


def plan_config_sync(
    existing: Mapping[str, StoredSummary], entries: Sequence[SyncEntry], *,
    prune_before: datetime | None = None,
) -> SyncPlan:
    """Decide what a sync of ``entries`` does to rows described by ``existing``.

    ``existing`` must describe every row whose source is ``config`` and every row whose name is
    in ``entries``. With ``prune_before`` (pruning on: the store's now minus the grace), the
    config rows out of ``entries``, disabled already and last written before it are deleted.
    """
    insert: list[SyncEntry] = []
    rewrite: list[SyncEntry] = []
    unchanged: list[str] = []
    conflicts: list[str] = []
    wanted = set()
    for entry in entries:
        name = entry.spec.name
        wanted.add(name)
        row = existing.get(name)
        if row is None:
            insert.append(entry)
        elif row.source is not ScheduleSource.CONFIG:
            conflicts.append(name)
        elif row.spec_hash == entry.spec.spec_hash() and (
                row.enabled == entry.spec.enabled or (row.paused and not row.enabled)):
            unchanged.append(name)
        else:
            rewrite.append(entry)
    disable = sorted(
        name
        for name, row in existing.items()
        if row.source is ScheduleSource.CONFIG and row.enabled and name not in wanted
    )
    delete = [] if prune_before is None else sorted(
        name
        for name, row in existing.items()
        if row.source is ScheduleSource.CONFIG and not row.enabled and name not in wanted
        and row.updated_at is not None and row.updated_at <= prune_before
    )
    report = SyncReport(
        created=tuple(e.spec.name for e in insert),
        updated=tuple(e.spec.name for e in rewrite),
        unchanged=tuple(unchanged),
        disabled=tuple(disable),
        conflicts=tuple(conflicts),
        deleted=tuple(delete),
    )
    return SyncPlan(insert=tuple(insert), rewrite=tuple(rewrite), disable=tuple(disable),
                    delete=tuple(delete), report=report)


#: Why a face refuses to edit or remove a schedule from ``beat_schedule`` (the HTTP API with a
#: 409, the dashboard, the CLI), after ``schedule '<name>' ``.
CONFIG_ROW = ("comes from the app's beat_schedule: the next config sync (when a replica becomes "
              "leader) puts back the configured version, so it is changed there; pause, "
              "resume and run now still work")


def config_row_refusal(schedule: Schedule) -> str | None:
    """Why an edit or a removal of ``schedule`` is refused by every face (None: it is not)."""
    if schedule.spec.source is not ScheduleSource.CONFIG:
        return None
    return f"schedule {quoted_name(schedule.name)} {CONFIG_ROW}"
