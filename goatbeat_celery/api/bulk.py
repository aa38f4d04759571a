"""Bulk actions: pause, resume or run now the schedules named, or every schedule carrying a
tag, with one reason.

Each schedule is its own compare-and-set with its own audit entry (the reason the same for
all), exactly as the single action writes it: one schedule's refusal (not found, already
paused, set aside, a row to repair) is reported beside it and never stops the others. What
is refused before any write is the call itself: no selection, a tag no schedule carries, too
many schedules, a bad reason or ``until``, every problem at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, cast

from goatbeat_celery.api.arguments import _lookup_problems, _note_problems
from goatbeat_celery.api.writes import ScheduleWrites
from goatbeat_celery.core.rules.audit import reason_problems
from goatbeat_celery.core.rules.controls import tag_filter_problems
from goatbeat_celery.core.rules.validation import (
    MAX_REASON_LENGTH,
    instant_problem,
)
from goatbeat_celery.core.types.errors import (
    ConfigurationError,
    ScheduleConflict,
    ScheduleNotFound,
    failure_reason,
)
from goatbeat_celery.core.types.instants import ensure_aware
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import quoted_name

__all__ = ["BULK_ACTIONS", "MAX_BULK", "BulkAction", "BulkOutcome", "BulkResult", "Refusal"]

logger = logging.getLogger(__name__)

#: The most schedules one bulk action touches: a bigger selection is refused whole, so that
#: no request holds the database for minutes or stops half-way through a tag.
MAX_BULK = 1000

BulkAction = Literal["pause", "resume", "run_now"]
BULK_ACTIONS: tuple[BulkAction, ...] = ("pause", "resume", "run_now")
#: What a schedule that took the action says, by action.
_DONE = {"pause": "paused", "resume": "resumed", "run_now": "run queued"}
#: Why a schedule was refused, for a face to answer by: ``conflict`` (its state: already
#: paused, not paused, set aside, changed meanwhile, a row to repair), ``not_found``, or
#: ``outside`` (a name the caller may not change here).
Refusal = Literal["conflict", "not_found", "outside"]


@dataclass(frozen=True)
class BulkOutcome:
    """What one schedule of a bulk action did: ``done`` (changed, its audit entry written) or
    refused, with why (``reason``) and its kind (``refusal``); ``run_key``: the key of the run
    a run now queued."""

    name: str
    done: bool
    reason: str
    run_key: str | None = None
    refusal: Refusal | None = None

    def as_json(self) -> dict[str, object]:
        found: dict[str, object] = {"name": self.name, "done": self.done,
                                    "reason": self.reason}
        if self.run_key is not None:
            found["run_key"] = self.run_key
        if self.refusal is not None:
            found["refusal"] = self.refusal
        return found


@dataclass(frozen=True)
class BulkResult:
    """A bulk action's answer: one outcome per schedule selected, in name order."""

    action: BulkAction
    outcomes: tuple[BulkOutcome, ...]

    @property
    def done(self) -> list[BulkOutcome]:
        return [outcome for outcome in self.outcomes if outcome.done]

    @property
    def refused(self) -> list[BulkOutcome]:
        return [outcome for outcome in self.outcomes if not outcome.done]

    @property
    def refused_whole(self) -> Refusal | None:
        """Why every schedule was refused, None when one was done: ``conflict`` when one was
        refused for its state, else ``outside`` when one was outside what may be changed,
        else ``not_found``."""
        if self.done or not self.outcomes:
            return None
        kinds = {outcome.refusal for outcome in self.outcomes}
        for kind in ("conflict", "outside"):
            if kind in kinds:
                return cast(Refusal, kind)
        return "not_found"

    def as_json(self) -> dict[str, object]:
        return {"action": self.action,
                "done": [outcome.as_json() for outcome in self.done],
                "refused": [outcome.as_json() for outcome in self.refused]}


class BulkMethods(ScheduleWrites):
    """Pause, resume and run now over many schedules."""

    def pause_many(self, names: Sequence[str] | None = None, *, tag: str | None = None,
                   until: datetime | None = None, note: str | None = None,
                   reason: str | None = None, within: str | None = None) -> BulkResult:
        """Pause each schedule of ``names`` or carrying ``tag`` (as :meth:`pause`, with
        ``until`` and ``note``); one already paused is refused and its pause kept.
        ``within``: only names starting with it are acted on, the others refused."""
        return self.bulk("pause", names, tag=tag, until=until, note=note, reason=reason,
                         within=within)

    def resume_many(self, names: Sequence[str] | None = None, *, tag: str | None = None,
                    reason: str | None = None, within: str | None = None) -> BulkResult:
        """Resume each schedule of ``names`` or carrying ``tag`` (as :meth:`resume`); one not
        paused, or set aside, is refused."""
        return self.bulk("resume", names, tag=tag, reason=reason, within=within)

    def run_now_many(self, names: Sequence[str] | None = None, *, tag: str | None = None,
                     reason: str | None = None, within: str | None = None) -> BulkResult:
        """Queue an extra run of each schedule of ``names`` or carrying ``tag`` (as
        :meth:`run_now`); one set aside is refused. A paused schedule runs too, as a single
        run now would."""
        return self.bulk("run_now", names, tag=tag, reason=reason, within=within)

    def bulk(self, action: BulkAction | str, names: Sequence[str] | None = None, *,
             tag: str | None = None, until: datetime | None = None,
             note: str | None = None, reason: str | None = None,
             within: str | None = None) -> BulkResult:
        """One of :data:`BULK_ACTIONS` by name (what the faces call); ``until`` and ``note``
        are a pause's only. ConfigurationError, with every problem and nothing changed, for
        a call refused whole."""
        problems: list[Problem] = []
        # One reading of the store's clock for the call: `until` is judged ahead of the same
        # reading each pause places its next run from (a later one may be past it).
        now = self.store.now()
        if action not in BULK_ACTIONS:
            problems.append(Problem("action", f"unknown action {action!r}",
                                    f"use one of: {', '.join(BULK_ACTIONS)}"))
        elif action != "pause":
            problems.extend(Problem(key, f"is for a pause, not {action.replace('_', ' ')}",
                                    "leave it out")
                            for key, value in (("until", until), ("note", note))
                            if value is not None)
        else:
            problems.extend(self._until_problems(until, now))
            problems.extend(_note_problems(note))
        selected = self._selection(names, tag, reason, problems, within)
        keys: dict[str, str] = {}

        def one(current: Schedule) -> str | None:
            if action == "pause":
                if current.paused_at(now):
                    return "already paused" + (
                        f" until {current.paused_until.isoformat()}"
                        if current.spec.enabled and current.paused_until is not None else "")
                why = note if reason is None else reason
                self._rewrite(current.name,
                              lambda row: self._paused(row, note, until, why, now=now))
                return None
            if action == "resume" and not current.paused_at(now):
                return "not paused"
            refused = _set_aside(current)
            if refused is not None:
                return refused
            if action == "resume":
                self._rewrite(current.name, lambda row: self._resumed(row, reason))
            else:
                keys[current.name] = self.run_now(current.name, reason=reason).key
            return None

        result = self._each(cast(BulkAction, action), selected, one, within)
        return BulkResult(result.action, tuple(
            BulkOutcome(o.name, o.done, o.reason, keys.get(o.name), o.refusal)
            for o in result.outcomes))

    # -- helpers ---------------------------------------------------------------------------
    def _until_problems(self, until: datetime | None, now: datetime) -> list[Problem]:
        if until is None:
            return []
        problem = instant_problem(until, "until")
        if problem is not None:
            return [problem]
        until = ensure_aware(until, "until")
        if until <= now:
            return [Problem("until", f"{until.isoformat()} is not after now "
                            f"({now.isoformat()})", "give a later instant")]
        return []

    def _selection(self, names: Sequence[str] | None, tag: str | None, reason: str | None,
                   problems: list[Problem], within: str | None) -> list[str]:
        """The names to act on, sorted and without repeats; ConfigurationError listing every
        problem (with those in ``problems``) when the call is refused whole."""
        problems.extend(reason_problems(reason))
        chosen: list[str] = []
        if isinstance(names, str):
            names = [names]  # one name given bare is one name, not its characters
        if names is not None and tag is not None and names:
            problems.append(Problem("tag", "give names or a tag, not both",
                                    "select by one of them"))
        elif tag is not None:
            tag_problems = tag_filter_problems([tag], "tag")
            problems.extend(tag_problems)
            if not tag_problems:
                found = self.store.list_schedules(tags=(tag,), prefix=within,
                                                  limit=MAX_BULK + 1)
                chosen = [schedule.name for schedule in found]
                if not chosen:
                    problems.append(Problem("tag", f"no schedule carries the tag {tag!r}",
                                            "check the tag (celery goatbeat list --tag)"))
        elif not names:
            problems.append(Problem("names", "no schedule selected",
                                    "select at least one schedule, or give a tag"))
        else:
            for name in names:
                problems.extend(_lookup_problems(name))
            chosen = sorted({name for name in names if isinstance(name, str)})
        if len(chosen) > MAX_BULK:
            field = "tag" if tag is not None else "names"
            problems.append(Problem(field, f"selects more than {MAX_BULK} schedules",
                                    "narrow the selection and act on each part"))
        if problems:
            raise ConfigurationError(problems, subject="bulk action")
        return chosen

    def _each(self, action: BulkAction, names: Sequence[str],
              one: Callable[[Schedule], str | None], within: str | None) -> BulkResult:
        """``one`` for each schedule of ``names``, read fresh; what it returns (or what it
        raises for that schedule) refuses it, None is done. A name not starting with
        ``within`` is refused on the name alone, whether it exists or not."""
        outcomes: list[BulkOutcome] = []
        for name in names:
            kind: Refusal = "conflict"
            if within is not None and not name.startswith(within):
                outcomes.append(BulkOutcome(
                    name, False, f"outside the names starting with {within!r} that may be "
                    "changed here", refusal="outside"))
                continue
            try:
                refused = one(self.store.get_schedule(name))
            except ScheduleNotFound:
                refused, kind = "not found", "not_found"
            except ConfigurationError as exc:
                refused = "; ".join(exc.problems) or str(exc)
            except ScheduleConflict as exc:
                refused = str(exc)
            # A schedule is a failure domain: one row's trouble is told beside it; an outage
            # (StoreUnavailable) travels up, as nothing after it could be written either.
            except ValueError as exc:
                refused = failure_reason(exc)
            outcomes.append(BulkOutcome(name, refused is None,
                                        _DONE[action] if refused is None else refused,
                                        refusal=None if refused is None else kind))
        done = sum(1 for outcome in outcomes if outcome.done)
        logger.info("bulk %s: %d done, %d refused", action, done, len(outcomes) - done,
                    extra={"action": f"bulk_{action}"})
        return BulkResult(action, tuple(outcomes))



def _set_aside(schedule: Schedule) -> str | None:
    """Why a set-aside schedule is refused a resume or a run now; None when it is not."""
    if schedule.damage:
        return (f"set aside: schedule {quoted_name(schedule.name)} cannot be read as stored; "
                "repair it first")
    if schedule.fault is not None:
        return f"set aside: {schedule.fault[:MAX_REASON_LENGTH]}; repair it first"
    return None
