"""Schedule controls: bounds (``start_at``, ``end_at``), the run limit (``max_runs``), pauses
with an end, previews of the next runs, and tags.

Every rule is written once here and used by the engine (what a claim may run), the API (where a
new, changed or resumed schedule starts, what a preview shows) and the stores (tag filters), so
that a preview lists exactly what the leader then runs. The run limit itself is checked in the
claim's transaction (:func:`goatbeat_celery.core.rules.claims.plan_claims`), against the count of
runs locked with the schedule's row.

Bounds apply to the *due* instant (the occurrence shifted by its offset or jitter): the instant
the run is sent. A pause with an end (``paused_until``) is a moving lower bound: the schedule
stays enabled, nothing runs before the pause ends, and occurrences that fell inside the pause
are neither run nor counted missed (as for a resumed schedule: a pause means "not these").
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from goatbeat_celery.core.rules.calendars import MAX_SCAN, Exclusions

# The first ``(occurrence, due)`` of a schedule whose due instant is strictly after an
# instant, ``(None, None)`` when there is none (the trigger is exhausted).
from goatbeat_celery.core.rules.policies import GridAfter
from goatbeat_celery.core.rules.validation import (
    LATEST_INSTANT,
    instant_problem,
    nul_problem,
    shown_value,
)
from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSpec

#: The most runs one preview lists.
MAX_PREVIEW = 1_000
#: The most tags one listing filters by. A reader chooses how many it sends, and each is one
#: more value to match in the tag index: bounded, so that no read costs more than it should.
MAX_FILTER_TAGS = 10

_MICROSECOND = timedelta(microseconds=1)


def lower_bound(spec: ScheduleSpec, paused_until: datetime | None = None) -> datetime | None:
    """The earliest due instant a run of the schedule may have: the later of ``start_at`` and
    the end of its pause (None: no bound)."""
    bounds = [b for b in (spec.start_at, paused_until) if b is not None]
    return max(bounds) if bounds else None


def bounded_first(grid_after: GridAfter, now: datetime, spec: ScheduleSpec,
                  paused_until: datetime | None = None
                  ) -> tuple[datetime | None, datetime | None]:
    """Where a schedule starts (created, changed, resumed or paused until an instant): its first
    ``(occurrence, due)`` due strictly after ``now``, at or after :func:`lower_bound`, at or
    before ``end_at``; ``(None, None)`` when there is none (ended, or the trigger exhausted)."""
    lower = lower_bound(spec, paused_until)
    after = now if lower is None else max(now, lower - _MICROSECOND)
    occurrence, due = grid_after(after)
    if due is None or (spec.end_at is not None and due > spec.end_at):
        return None, None
    return occurrence, due


def bound_claim(claim: PlannedClaim, schedule: Schedule, grid_after: GridAfter) -> PlannedClaim:
    """``claim`` within the schedule's bounds: occurrences due before the lower bound (a row
    edited meanwhile) or after ``end_at`` are dropped; a next run before the lower bound moves
    to the first after it; a next run after ``end_at`` becomes none (the schedule has ended,
    like a ``once`` that ran)."""
    spec = schedule.spec
    lower = lower_bound(spec, schedule.paused_until)
    end = spec.end_at
    if lower is None and end is None:
        return claim
    occurrences = tuple((point, due) for point, due in claim.occurrences
                        if (lower is None or due >= lower) and (end is None or due <= end))
    next_occurrence, next_run = claim.next_occurrence_at, claim.next_run_at
    if next_run is not None and lower is not None and next_run < lower:
        next_occurrence, next_run = grid_after(lower - _MICROSECOND)
    if next_run is not None and end is not None and next_run > end:
        next_occurrence, next_run = None, None
    if (occurrences == claim.occurrences and next_run == claim.next_run_at
            and next_occurrence == claim.next_occurrence_at):
        return claim
    return replace(claim, occurrences=occurrences, next_occurrence_at=next_occurrence,
                   next_run_at=next_run)


def upcoming_runs(schedule: Schedule, grid_after: GridAfter, count: int, *,
                  delay: timedelta | None = None,
                  exclusions: Exclusions | None = None) -> list[datetime]:
    """The due instants of the schedule's next ``count`` runs (at most :data:`MAX_PREVIEW`),
    as the leader will claim them when it claims on time: from the stored next run, within
    the bounds and the pause, no more than the runs left before ``max_runs``.

    A paused schedule (disabled) has none until resumed. A fixed-delay schedule (``delay``)
    runs one delay after the previous run *ended*: the preview assumes runs that take no time.

    Occurrences ``exclusions`` exclude (its calendars) are stepped over, as the leader skips
    them; the preview stops after :data:`~goatbeat_celery.core.rules.calendars.MAX_SCAN` of them.
    """
    if not schedule.spec.enabled or schedule.next_run_at is None:
        return []
    wanted = min(max(count, 0), MAX_PREVIEW)
    left = schedule.runs_left
    if left is not None:
        wanted = min(wanted, left)
    spec = schedule.spec
    lower = lower_bound(spec, schedule.paused_until)
    found: list[datetime] = []
    due: datetime | None = schedule.next_run_at
    stepped = 0
    while due is not None and len(found) < wanted:
        if lower is not None and due < lower:
            _, due = grid_after(lower - _MICROSECOND)
            continue
        if spec.end_at is not None and due > spec.end_at:
            break
        if exclusions is not None and exclusions.reason(due) is not None:
            stepped += 1
            if stepped > MAX_SCAN:
                break
            # Every occurrence due later the same local day is excluded too: go to the next
            # day at once. A fixed delay has no grid: each excluded run is followed by one a
            # delay on, so the first of those on the next day.
            next_day = exclusions.next_day(due)
            if delay is None:
                due = grid_after(next_day - _MICROSECOND)[1]
            else:
                due = _delayed(due, delay * max(1, -((due - next_day) // delay)))
            continue
        found.append(due)
        due = grid_after(due)[1] if delay is None else _delayed(due, delay)
    return found


def _delayed(due: datetime, delay: timedelta) -> datetime | None:
    """``due + delay``, or None past :data:`~goatbeat_celery.core.rules.validation.LATEST_INSTANT`:
    as a trigger has no occurrence past it, a fixed delay has no run there either."""
    return None if due > LATEST_INSTANT - delay else due + delay


def past_once_problem(spec: ScheduleSpec, now: datetime) -> Problem | None:
    """Why a one-time schedule given its ``at`` now (created, or its instant changed) is
    refused: its due instant (``at`` after its offset or jitter) is not after ``now``, so it
    would be stored and never run. None for any other schedule, or an instant still ahead, and
    while ``at`` or the shift breaks its own rule (its own problem names it: a due instant made
    of them means nothing, and may not even be a datetime)."""
    if spec.trigger.kind != "once":
        return None
    raw = spec.trigger.params.get("at")
    try:
        at = datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        at = None
    if at is None or instant_problem(at, "at") is not None:
        return None  # the trigger's own check names it
    shift = spec.checked_offset()
    if shift is None:
        return None  # the offset's, the jitter's or the name's own check names it
    # Both within their bounds: the sum cannot overflow.
    due = at + shift
    if due > now:
        return None
    shifted = "" if due == at else f" (due {due.isoformat()} after its offset)"
    return Problem("at", f"{at.isoformat()}{shifted} is not after now ({now.isoformat()})",
                   "a one-time schedule runs only at an instant still ahead, so it would never "
                   "run: give a later instant, or ask for a run now (run_now; run-now on the "
                   "command line)")


def has_tags(tags: Collection[str], wanted: Sequence[str]) -> bool:
    """Whether a schedule carrying ``tags`` carries every one of ``wanted``. The stores answer
    it through a tag index, one entry (tag, name) per distinct tag a schedule carries: a
    schedule matches when each wanted tag has an entry for its name."""
    return all(tag in tags for tag in wanted)


def tag_filter_problems(wanted: object, label: str = "tags") -> list[Problem]:
    """Problems of the tags a listing is filtered by: a list (or tuple, or set) of at most
    :data:`MAX_FILTER_TAGS` strings without NUL, every problem at once, named ``label`` (the
    HTTP API's query parameter is ``tag``)."""
    if not isinstance(wanted, (list, tuple, set, frozenset)):
        return [Problem(label, f"expected a list of tags, got {shown_value(wanted)}")]
    found: list[Problem] = []
    if len(wanted) > MAX_FILTER_TAGS:
        found.append(Problem(label, f"{len(wanted)} tags given; a listing is filtered by at "
                             f"most {MAX_FILTER_TAGS}",
                             f"give the {MAX_FILTER_TAGS} that narrow it most (tag= in the "
                             "HTTP API, --tag on the command line)"))
    for tag in wanted:
        if not isinstance(tag, str):
            found.append(Problem(label, f"expected text, got {shown_value(tag)}"))
        elif (problem := nul_problem(tag, label)) is not None:
            found.append(problem)
    return found


__all__ = ["MAX_FILTER_TAGS", "MAX_PREVIEW", "bound_claim", "bounded_first", "has_tags",
           "lower_bound", "past_once_problem", "tag_filter_problems", "upcoming_runs"]
