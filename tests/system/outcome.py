"""What a fault scenario amounts to, in figures, from the executions table and the worker's
records only (never from log text).

Instants: the database's ``now()`` and the worker's ``time.time()`` read the same system clock
(everything runs on one machine), so database instants and arrival times compare directly; a
replica whose clock is skewed with libfaketime writes no instant that is compared here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class Occurrence:
    """One execution row and what the worker received under its key."""

    key: str
    schedule: str
    occurrence_at: datetime
    due_at: datetime
    token: int
    state: str
    claimed_at: datetime
    submitted_at: datetime | None
    attempts: int
    missed: int
    manual: bool
    arrivals: tuple[float, ...]
    delivered_by: tuple[int | None, ...]
    labels: tuple[str, ...]

    @property
    def due(self) -> float:
        return self.due_at.timestamp()

    @property
    def claim_lateness(self) -> float:
        return self.claimed_at.timestamp() - self.due

    @property
    def submit_lateness(self) -> float | None:
        return None if self.submitted_at is None else self.submitted_at.timestamp() - self.due

    @property
    def first_arrival(self) -> float | None:
        return min(self.arrivals) if self.arrivals else None

    @property
    def arrival_lateness(self) -> float | None:
        first = self.first_arrival
        return None if first is None else first - self.due


def join(executions: Sequence[dict[str, Any]],
         records: Sequence[dict[str, Any]]) -> list[Occurrence]:
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_key[record["id"]].append(record)
    return [
        Occurrence(
            key=row["key"], schedule=row["schedule_name"], occurrence_at=row["occurrence_at"],
            due_at=row["due_at"], token=row["token"], state=row["state"],
            claimed_at=row["claimed_at"], submitted_at=row["submitted_at"],
            attempts=row["attempts"], missed=row["missed"], manual=row["manual"],
            arrivals=tuple(r["received_at"] for r in by_key.get(row["key"], ())),
            delivered_by=tuple(r["token"] for r in by_key.get(row["key"], ())),
            labels=tuple(r["label"] for r in by_key.get(row["key"], ())),
        )
        # A skipped row records an occurrence given up (a misfire rule, an overlap policy):
        # never sent, so, as an occurrence without a row, one that did not run.
        for row in executions if row["state"] != "skipped"
    ]


def grid(start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    """Points ``k * step`` from the epoch within ``[start, end]``."""
    epoch = datetime(1970, 1, 1, tzinfo=start.tzinfo)
    first = epoch + -((epoch - start) // step) * step
    points = []
    while first <= end:
        points.append(first)
        first += step
    return points


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@dataclass
class Outcome:
    """A run's executions joined with deliveries; ``until`` leaves out the tail claimed while
    the replicas were being stopped (checked separately by :meth:`tail_kept`)."""

    occurrences: list[Occurrence]
    records: list[dict[str, Any]]
    until: datetime | None = None

    @classmethod
    def of(cls, executions: Sequence[dict[str, Any]], records: Sequence[dict[str, Any]],
           until: datetime | None = None) -> Outcome:
        return cls(join(executions, records), list(records), until)

    # -- the verdict -----------------------------------------------------------------------
    @property
    def checked(self) -> list[Occurrence]:
        return [o for o in self.occurrences if self.until is None or o.due_at <= self.until]

    @property
    def scheduled(self) -> list[Occurrence]:
        return [o for o in self.checked if not o.manual]

    def claimed_twice(self) -> list[tuple[str, datetime]]:
        """(schedule, occurrence) pairs with more than one execution row (the key is unique,
        so this also catches two keys spelling one occurrence)."""
        pairs = Counter((o.schedule, o.occurrence_at) for o in self.occurrences if not o.manual)
        return [pair for pair, n in pairs.items() if n > 1]

    def not_delivered(self) -> list[str]:
        return [o.key for o in self.checked if not o.arrivals]

    def unsubmitted(self) -> list[str]:
        return [o.key for o in self.checked if o.state != "submitted"]

    def duplicates(self) -> list[Occurrence]:
        """Keys the worker received more than once."""
        return [o for o in self.occurrences if len(o.arrivals) > 1]

    def foreign(self) -> list[str]:
        keys = {o.key for o in self.occurrences}
        return sorted({r["id"] for r in self.records} - keys)

    def tail_kept(self) -> list[str]:
        """Keys after ``until`` that were neither delivered nor left ``claimed`` for the next
        leader: lost (should be empty)."""
        return [o.key for o in self.occurrences
                if self.until is not None and o.due_at > self.until
                and not o.arrivals and o.state != "claimed"]

    def assert_sound(self, *, duplicates_allowed: bool = False) -> None:
        """Nothing claimed twice, nothing lost, nothing unknown delivered; duplicates only
        where a resubmission happened (and only when the scenario has a crash window)."""
        assert self.claimed_twice() == [], f"claimed twice: {self.claimed_twice()[:5]}"
        assert self.not_delivered() == [], f"never delivered: {self.not_delivered()[:10]}"
        assert self.unsubmitted() == [], f"left unsubmitted: {self.unsubmitted()[:10]}"
        assert self.foreign() == [], f"delivered but never claimed: {self.foreign()[:10]}"
        assert self.tail_kept() == [], f"lost at shutdown: {self.tail_kept()[:10]}"
        duplicates = self.duplicates()
        if not duplicates_allowed:
            assert duplicates == [], f"delivered twice: {[d.key for d in duplicates][:10]}"
        for dup in duplicates:
            # A key delivered twice must have been submitted twice: a resubmission of a claim
            # whose first submission was not recorded, never a second claim.
            assert dup.attempts > 1, f"{dup.key} delivered twice but submitted once"

    # -- figures ---------------------------------------------------------------------------
    def due_between(self, start: float, end: float) -> list[Occurrence]:
        return [o for o in self.scheduled if start <= o.due <= end]

    def missing(self, step: timedelta, start: datetime, end: datetime,
                names: Iterable[str]) -> dict[str, list[datetime]]:
        """Grid points in ``[start, end]`` of each schedule with no execution."""
        present: dict[str, set[datetime]] = defaultdict(set)
        for o in self.scheduled:
            present[o.schedule].add(o.occurrence_at)
        points = grid(start, end, step)
        return {name: [p for p in points if p not in present[name]] for name in names}

    def arrival_gap(self, start: float, end: float) -> float:
        """The largest interval between consecutive first arrivals of one schedule's
        occurrences due in ``[start, end]``, over all schedules."""
        arrivals: dict[str, list[float]] = defaultdict(list)
        for o in self.due_between(start, end):
            if o.first_arrival is not None:
                arrivals[o.schedule].append(o.first_arrival)
        gaps = []
        for times in arrivals.values():
            ordered = sorted(times)
            gaps.extend(b - a for a, b in zip(ordered, ordered[1:], strict=False))
        return max(gaps, default=0.0)

    def max_lateness(self, start: float = float("-inf"), end: float = float("inf")) -> float:
        """Largest submitted_at - due_at of the occurrences due in the window."""
        values = [o.submit_lateness for o in self.due_between(start, end)]
        return max((v for v in values if v is not None), default=0.0)

    def max_wait_after(self, fault: float, end: float) -> float:
        """Largest time an occurrence due from a second before ``fault`` until ``end`` waited
        to be submitted, counted from the fault or from its due time, whichever is later:
        what the fault cost, without the wait a batch in flight at the fault had already
        done (it fell due up to a second before)."""
        values = [o.submitted_at.timestamp() - max(o.due, fault)
                  for o in self.due_between(fault - 1, end) if o.submitted_at is not None]
        return max(values, default=0.0)

    def lateness_figures(self) -> dict[str, str]:
        submit = [v for o in self.scheduled if (v := o.submit_lateness) is not None]
        arrival = [v for o in self.scheduled if (v := o.arrival_lateness) is not None]
        return {
            "submit_lateness_p50": f"{percentile(submit, 0.5) * 1000:.0f}ms",
            "submit_lateness_p99": f"{percentile(submit, 0.99) * 1000:.0f}ms",
            "submit_lateness_max": f"{max(submit, default=0) * 1000:.0f}ms",
            "arrival_lateness_p99": f"{percentile(arrival, 0.99) * 1000:.0f}ms",
        }

    def counts(self) -> dict[str, int]:
        return {"executions": len(self.checked), "claimed_twice": len(self.claimed_twice()),
                "duplicates_delivered": sum(len(o.arrivals) - 1 for o in self.duplicates())}


def seconds(value: float) -> str:
    return f"{value:.2f}s"


__all__ = ["Occurrence", "Outcome", "grid", "join", "percentile", "seconds"]
