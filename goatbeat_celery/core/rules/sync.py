"""Config sync decisions, shared by every store so that they cannot disagree.

Config entries are upserted by name: an unchanged spec keeps its ``next_run_at`` (a restart never
resets or re-fires a schedule), a changed one is rescheduled, an entry gone from config is
disabled (not deleted), and rows created through the API are never touched. A schedule that
paused itself after failed runs stays paused while its entry is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from goatbeat_celery.core.types.spec import ScheduleSource, SyncEntry, SyncReport


@dataclass(frozen=True, kw_only=True)
class StoredSummary:
    """The part of a stored row that config sync looks at."""

    spec_hash: str
    enabled: bool
    source: ScheduleSource
    #: The schedule paused itself after failed runs in a row (``paused_reason`` is set): an
    #: unchanged entry leaves it paused; a changed one (the fix) runs it again.
    paused: bool = False


@dataclass(frozen=True, kw_only=True)
class SyncPlan:
    """Rows to insert, to rewrite (spec and times, version + 1) and to disable."""

    insert: tuple[SyncEntry, ...]
    rewrite: tuple[SyncEntry, ...]
    disable: tuple[str, ...]
    report: SyncReport


def plan_config_sync(
    existing: Mapping[str, StoredSummary], entries: Sequence[SyncEntry]
) -> SyncPlan:
    """Decide what a sync of ``entries`` does to rows described by ``existing``.

    ``existing`` must describe every row whose name is in ``entries`` and every row whose source
    is ``config``.
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
    report = SyncReport(
        created=tuple(e.spec.name for e in insert),
        updated=tuple(e.spec.name for e in rewrite),
        unchanged=tuple(unchanged),
        disabled=tuple(disable),
        conflicts=tuple(conflicts),
    )
    return SyncPlan(insert=tuple(insert), rewrite=tuple(rewrite), disable=tuple(disable),
                    report=report)
