"""Backfills and their previews, for ``backfill`` and its ``--json``."""

from __future__ import annotations

from typing import Any

from goatbeat_celery.core.rules.backfill import Backfill, BackfillPreview
from goatbeat_celery.display.scalars import iso, when


def backfill_json(backfill: Backfill) -> dict[str, Any]:
    """A backfill for scripts: ``backfill`` commands with ``--json`` and the HTTP API's
    backfills give this document; a contract.

    Every key is always present (null where unset): ``id``, ``schedule``, ``start``, ``end``,
    ``mode``, ``newest_first``, ``per_tick``, ``state``, ``total``, ``examined``, ``claimed``,
    ``cursor`` (the last occurrence examined), ``created_at``, ``finished_at``, ``error`` and
    ``damage``. Instants are ISO-8601 in UTC."""
    return {
        "id": backfill.id,
        "schedule": backfill.schedule_name,
        "start": iso(backfill.start),
        "end": iso(backfill.end),
        "mode": backfill.mode.value,
        "newest_first": backfill.newest_first,
        "per_tick": backfill.per_tick,
        "state": backfill.state.value,
        "total": backfill.total,
        "examined": backfill.examined,
        "claimed": backfill.claimed,
        "cursor": iso(backfill.cursor),
        "created_at": iso(backfill.created_at),
        "finished_at": iso(backfill.finished_at),
        "error": backfill.error,
        "damage": [str(d) for d in backfill.damage],
    }


BACKFILL_COLUMNS = ("ID", "SCHEDULE", "FROM", "TO", "MODE", "STATE", "EXAMINED", "CLAIMED",
                    "CREATED")


def backfill_row(backfill: Backfill) -> tuple[str, ...]:
    order = " newest first" if backfill.newest_first else ""
    return (str(backfill.id), backfill.schedule_name, when(backfill.start), when(backfill.end),
            backfill.mode.value + order, backfill.state.value,
            f"{backfill.examined}/{backfill.total}", str(backfill.claimed),
            when(backfill.created_at))


def backfill_preview_json(preview: BackfillPreview) -> dict[str, Any]:
    """What a backfill would do, for scripts: ``backfill --dry-run --json`` and the HTTP API's
    preview give this document; a contract.

    Keys, always present: ``schedule``, ``start``, ``end``, ``mode``, ``newest_first``,
    ``total`` and ``runs``, each run ``{"occurrence_at", "key", "reason"}``. Instants are
    ISO-8601 in UTC."""
    return {
        "schedule": preview.schedule_name,
        "start": iso(preview.start),
        "end": iso(preview.end),
        "mode": preview.mode.value,
        "newest_first": preview.newest_first,
        "total": preview.total,
        "runs": [{"occurrence_at": iso(run.occurrence_at), "key": run.key,
                  "reason": run.reason} for run in preview.runs],
    }


PREVIEW_COLUMNS = ("OCCURRENCE", "KEY", "WHY")


def backfill_preview_rows(preview: BackfillPreview) -> list[tuple[str, ...]]:
    return [(when(run.occurrence_at), run.key, run.reason) for run in preview.runs]
