"""Backfills and their previews, for ``backfill`` and its ``--json``."""

from __future__ import annotations

from typing import Any

from goatbeat_celery.core.rules.backfill import Backfill, BackfillPreview
from goatbeat_celery.core.rules.backfill_outcomes import BackfillOutcomes, Rerun
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


def outcomes_text(outcomes: dict[str, int]) -> str:
    """``3 succeeded, 1 failed, 2 running``: runs counted by outcome, as the runs page words
    each (what a worker reported, else beat's dispatch state); ``none``."""
    return ", ".join(f"{n} {outcome}" for outcome, n in outcomes.items()) or "none"


def backfill_outcome_lines(found: BackfillOutcomes) -> list[tuple[str, str]]:
    """The lines ``backfill-show`` adds below a backfill: what became of its occurrences."""
    b = found.backfill
    lines = [("runs", outcomes_text(found.outcomes)),
             ("not run", f"{found.not_run}" + (f" (looked at; its mode {b.mode.value} left "
                                               "them alone)" if found.not_run else "")),
             ("to look at", str(found.to_examine))]
    if found.not_recorded:
        lines.append(("not recorded", f"{found.not_recorded} (pruned by the retention)"))
    lines.extend((f"re-run {r.round}", f"{when(r.requested_at)}: {outcomes_text(r.outcomes)} "
                  f"(keys ending :backfill-{b.id}-rerun-{r.round})") for r in found.reruns)
    lines.append(("failed now", f"{len(found.failed)} occurrences whose latest run failed, was "
                  "lost or never sent"))
    return lines


def backfill_outcomes_json(found: BackfillOutcomes) -> dict[str, Any]:
    """What became of a backfill's occurrences, for scripts: ``backfill-show --json`` and the
    HTTP API's backfill give this document as the backfill's ``outcomes``; a contract.

    Keys, always present: ``runs`` (its own runs by outcome: ``{"succeeded": 3, …}``, only the
    outcomes it has), ``not_run`` (occurrences looked at and left alone by its mode),
    ``to_examine`` (not looked at yet), ``not_recorded`` (runs whose execution was pruned),
    ``reruns`` (each ``{"round", "requested_at", "runs", "key_suffix"}``, oldest first) and
    ``failed`` (the occurrences whose latest run failed, was lost or never sent, oldest
    first: what a re-run of the failed ones runs). Instants are ISO-8601 in UTC."""
    b = found.backfill
    return {"runs": dict(found.outcomes), "not_run": found.not_run,
            "to_examine": found.to_examine, "not_recorded": found.not_recorded,
            "reruns": [{"round": r.round, "requested_at": iso(r.requested_at),
                        "runs": dict(r.outcomes), "key_suffix": f":backfill-{b.id}-rerun-{r.round}"}
                       for r in found.reruns],
            "failed": [iso(at) for at in found.failed]}


def rerun_json(rerun: Rerun) -> dict[str, Any]:
    """A re-run of a backfill's failed occurrences, for scripts: ``backfill-rerun-failed
    --json`` and the HTTP API give this document; a contract. Keys: ``backfill`` (its id),
    ``schedule``, ``round`` and ``runs``, each ``{"occurrence_at", "key"}``."""
    return {"backfill": rerun.backfill.id, "schedule": rerun.backfill.schedule_name,
            "round": rerun.round,
            "runs": [{"occurrence_at": iso(e.occurrence_at), "key": e.key}
                     for e in rerun.executions]}
