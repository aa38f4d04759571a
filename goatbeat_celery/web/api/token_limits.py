"""What a token's prefix and scopes decide beyond the route it calls.

Calendars are scoped by their own names, as schedules are: a token limited to ``team-a-`` reads
and writes only ``team-a-…`` calendars, is shown only ``team-a-…`` schedules among those
observing one, and may make a schedule observe only ``team-a-…`` calendars (besides those it
observes already, put there by a token covering them). That last refusal depends on the names
alone, so a token can neither learn which other calendars exist (an existing and a missing one
are answered alike) nor pin another team's calendar (one observed cannot be deleted).

The ``run`` scope covers runs on demand: run now, backfills, and a one-time run (``at``) due
within :data:`RUN_SOON` of the write that sets it, which is a run now by another name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from goatbeat_celery import spec_input
from goatbeat_celery.core.types.errors import CalendarInUse, ScheduleNotFound
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.tokens import ApiToken, Scope
from goatbeat_celery.web.api.problem import ApiProblem

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules

#: A one-time run a write makes due sooner than this needs the ``run`` scope besides ``write``.
RUN_SOON = timedelta(minutes=15)
#: How many observing schedules a refused deletion names.
_NAMED = 10


def shown_observers(token: ApiToken, names: Iterable[str]) -> list[str]:
    """Those of the schedules ``names`` (observing a calendar) that ``token`` may see."""
    return [name for name in names if token.covers(name)]


def calendar_in_use(token: ApiToken, exc: CalendarInUse) -> ApiProblem:
    """The 409 to a deletion of a calendar still observed, naming only the observers the token
    may see and saying, without a name or a count, that others observe it too."""
    shown = shown_observers(token, exc.schedules)
    if len(shown) == len(exc.schedules):
        return ApiProblem(409, "Conflict", str(exc))
    named = ", ".join(repr(name) for name in shown[:_NAMED])
    more = "" if len(shown) <= _NAMED else f" and {len(shown) - _NAMED} more"
    ours = f"{named}{more} and by " if shown else ""
    return ApiProblem(409, "Conflict",
                      f"calendar {exc.name!r} is observed by {ours}schedules outside token "
                      f"{token.name!r}'s prefix; it is deleted once no schedule observes it "
                      "(those others are changed with a token that covers them)")


def _named(value: object) -> list[str]:
    """The calendar names a request's ``calendars`` gives (its own check names a bad value)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [name for name in value if isinstance(name, str)]
    return []


def _current(schedules: Schedules, name: str) -> Schedule | None:
    try:
        return schedules.get(name)
    except ScheduleNotFound:
        return None


def refuse_foreign_calendars(schedules: Schedules, token: ApiToken, name: str,
                             given: Mapping[str, Any]) -> None:
    """403 when ``given`` (a PUT's or a PATCH's body) makes schedule ``name`` observe a calendar
    outside the token's prefix that it does not observe already; judged on the names, so an
    existing calendar and a missing one are answered alike."""
    outside = [c for c in dict.fromkeys(_named(given.get("calendars"))) if not token.covers(c)]
    if not outside:
        return
    current = _current(schedules, name)
    observed = set(current.spec.calendars) if current is not None else set()
    refused = [calendar for calendar in outside if calendar not in observed]
    if refused:
        raise ApiProblem(
            403, "Outside the token's prefix",
            f"token {token.name!r} may make a schedule observe only calendars whose names start "
            f"with {token.prefix!r}; nothing was changed",
            tuple(Problem("calendars", f"{calendar!r} is outside the token's prefix",
                          f"use a calendar starting with {token.prefix!r}; another is added "
                          "with a token that covers it") for calendar in refused))


def _instant_of(trigger: Any) -> datetime | None:
    """The instant of a one-time trigger (None for another kind, or one that cannot be read:
    its own check names it)."""
    at = trigger.params.get("at") if trigger is not None and trigger.kind == "once" else None
    return datetime.fromisoformat(at) if isinstance(at, str) else None


def refuse_run_on_demand(schedules: Schedules, token: ApiToken, name: str,
                         given: Mapping[str, Any]) -> None:
    """403 when a token without the ``run`` scope sets a one-time run (``at``) due within
    :data:`RUN_SOON`: creating one, or moving one's instant, paused or not (a resume would send
    it). Giving a schedule the instant it already has is no new run."""
    if token.allows(Scope.RUN) or given.get("at") is None:
        return
    at = _instant_of(spec_input.trigger_spec(None, None, given["at"], None, [], default_zone="UTC"))
    now = schedules.now()
    if at is None or at >= now + RUN_SOON:
        return
    current = _current(schedules, name)
    if current is not None and _instant_of(current.spec.trigger) == at:
        return
    minutes = int(RUN_SOON.total_seconds() // 60)
    raise ApiProblem(
        403, "Missing scope",
        f"token {token.name!r} has no 'run' scope, and a one-time run due within {minutes} "
        "minutes is a run on demand; nothing was changed",
        (Problem("at", f"{at.isoformat()} is less than {minutes} minutes ahead "
                 f"({now.isoformat()} now)",
                 f"give an instant at least {minutes} minutes ahead, or use a token with "
                 "--scope run (which may also run it now)"),))


def refuse_beyond_token(schedules: Schedules, token: ApiToken, name: str,
                        given: Mapping[str, Any]) -> None:
    """A schedule's write (a PUT's or a PATCH's body ``given``) refused for what its fields ask
    beyond the token's prefix and scopes, before anything is written."""
    refuse_foreign_calendars(schedules, token, name, given)
    refuse_run_on_demand(schedules, token, name, given)


__all__ = ["RUN_SOON", "calendar_in_use", "refuse_beyond_token", "refuse_foreign_calendars",
           "refuse_run_on_demand", "shown_observers"]
