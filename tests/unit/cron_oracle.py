"""A brute-force model of the cron DST rules, to check CronTrigger against.

It scans every real minute and asks what its wall time is — the opposite direction from
CronTrigger, which maps wall-time matches to instants — so the two share no logic beyond
croniter's parsing of the fields.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from croniter import croniter

UTC = timezone.utc
MINUTE = timedelta(minutes=1)
FULL = {0: range(60), 1: range(24), 2: range(1, 32), 3: range(1, 13), 4: range(7)}


def wall_matcher(expression: str, *, day_or: bool = True) -> Callable[[datetime], bool]:
    """Whether a naive wall time matches a plain expression (numbers, ranges, steps, lists)."""
    expanded, special = croniter.expand(expression)
    assert not special, "the oracle only models plain expressions"
    sets = [set(FULL[i]) if field == ["*"] else {int(v) for v in field}
            for i, field in enumerate(expanded)]
    minutes, hours, days, months, weekdays = sets
    days_star, weekdays_star = expanded[2] == ["*"], expanded[4] == ["*"]

    def matches(wall: datetime) -> bool:
        if wall.minute not in minutes or wall.hour not in hours or wall.month not in months:
            return False
        day_ok = wall.day in days
        weekday_ok = (wall.isoweekday() % 7) in weekdays
        if days_star or weekdays_star or not day_or:
            return day_ok and weekday_ok
        return day_ok or weekday_ok

    return matches


def expected_occurrences(expression: str, zone: ZoneInfo, start: datetime, end: datetime, *,
                         day_or: bool = True) -> list[datetime]:
    """Occurrences in ``(start, end]`` by the rules of Vixie cron / cronie."""
    fields = expression.split()
    wildcard = fields[0].startswith("*") or fields[1].startswith("*")
    matches = wall_matcher(expression, day_or=day_or)
    found: list[datetime] = []
    instant = start.replace(second=0, microsecond=0) + MINUTE
    previous = (instant - MINUTE).astimezone(zone)
    while instant <= end:
        local = instant.astimezone(zone)
        wall = local.replace(tzinfo=None, fold=0)
        hit = matches(wall) and (wildcard or local.fold == 0)
        jumped = wall - previous.replace(tzinfo=None, fold=0) - MINUTE
        if not wildcard and jumped > timedelta(0):
            # Spring forward at this instant: the skipped wall times run now, once.
            skipped = previous.replace(tzinfo=None, fold=0) + MINUTE
            while skipped < wall and not hit:
                hit = matches(skipped)
                skipped += MINUTE
        if hit:
            found.append(instant)
        previous = local
        instant += MINUTE
    return found
