"""How the pages show instants, keys, states and runtimes: short in the cell, exact on hover.

An instant is shown relative to the database clock (``3m ago``, ``in 12s``) inside a ``<time>``
element whose ``title`` holds the exact UTC value and the same instant in a zone of the
operator's (the schedule's own, else the dashboard's default zone): no script is needed to read
either. States are pills in one vocabulary, :func:`goatbeat_celery.display.run_status` for runs
and :func:`goatbeat_celery.display.state_text` for schedules, the words the CLI prints.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from markupsafe import Markup, escape

from goatbeat_celery import display
from goatbeat_celery.core.rules.origin import backfill_of_key
from goatbeat_celery.core.rules.status import State
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.schedule import Schedule

#: The colour of each state's pill: what went well, what went wrong, what is under way, what
#: deserves a look, and what is simply so.
_TONES = {
    "succeeded": "good", "enabled": "good",
    "failed": "bad", "lost": "bad", "rejected": "bad", "abandoned": "bad", "expired": "bad",
    "set aside": "bad", "paused, damaged": "bad",
    "running": "live", "retrying": "live", "submitted": "live", "claimed": "live",
    "held": "live",
    "revoked": "warn", "skipped": "warn", "unknown": "warn", "paused": "warn",
    "paused until": "warn",
    "ended": "quiet",
    # Backfills and leases.
    "active": "live", "done": "good", "cancelled": "quiet",
    "leader": "good", "standby": "quiet", "gone": "warn", "silent": "bad", "not taken": "warn",
    # Alerts a person handled.
    "acknowledged": "quiet", "silenced": "warn",
}
#: Messages shown after an action redirects back (by code, so no text travels in the URL).
NOTICES = {
    "paused": "Paused.", "resumed": "Resumed from its next occurrence.",
    "queued": "Run queued: the leader sends it within a second or so.",
    "saved": "Saved.", "created": "Created.", "removed": "Removed; its history stays.",
    "backfill": "Backfill stored: the leader runs it after the live schedules, a few a tick.",
    "cancelled": "Cancelled: nothing more is claimed for it; what it claimed already is sent.",
    "calendar": "Saved: the leader applies it the next time it plans.",
    "calendar-removed": "Calendar removed.",
    "rerun": "Failed occurrences queued again under new keys: the leader sends them within "
             "a second or so.",
    "reverted": "Reverted: the fields of that edit are back to their values before it.",
    "revoked": "Revoke sent: a worker discards this run if it has not started.",
    "terminated": "Revoke sent with terminate: a worker running it stops it if its pool can.",
    "acknowledged": "Alert acknowledged: it stays open; counted again, it is not told again "
                    "(its resolution is).",
    "silenced": "Alert silenced: its repeats are not told until then (its resolution is); if "
                "it is still open then, it is told again.",
}
#: Runtime percentiles shown for a schedule (nearest rank), and the most runs they are read from.
PERCENTILES = (50, 90, 99)


def tone(state: str) -> str:
    """The pill colour of a state word (``paused until <instant>`` as ``paused until``)."""
    if state.startswith("paused until"):
        return "warn"
    return _TONES.get(state, "quiet")


def pill(state: str, *, title: str = "", text: str = "") -> Markup:
    """``state`` as a pill of its colour, reading ``text`` when given (a count after it)."""
    hover = Markup(' title="{}"').format(title) if title else Markup("")
    return Markup('<span class="pill {tone}"{hover}>{text}</span>').format(
        tone=tone(state), hover=hover, text=text or state)


_SEPARATORS = re.compile(r"([./:_-])")
#: An ISO-8601 instant as the faces write one (``2026-12-06T15:00:00.123+00:00``, ``…Z``), in
#: text that may hold others (a run key, a reason, a change).
_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
                      r"(?:Z|[+-]\d{2}:?\d{2})?)?")


def _parts(text: str, between: str) -> Markup:
    """``text`` escaped, each instant in it kept on one line (a ``nw`` span), the text between
    them passed through ``between``'s separators (``""``: as it is)."""
    found = []
    start = 0
    for match in _INSTANT.finditer(text):
        found.append(_separated(text[start:match.start()], between))
        if match.start() and not text[match.start() - 1].isspace() and not between:
            found.append("<wbr>")  # a key's name:instant may break before the instant
        found.append(_instant_markup(match.group(), switchable=not between))
        start = match.end()
    found.append(_separated(text[start:], between))
    return Markup("".join(found))


def _instant_markup(text: str, *, switchable: bool) -> str:
    """An instant of free text kept on one line. One written as the faces show instants (UTC,
    ending ``Z``: :func:`goatbeat_celery.display.when`) is a ``<time>`` the page's script may
    show in local time; any other (a run key's ``+00:00``, a bare date) stays as written."""
    if switchable and text.endswith("Z"):
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return str(Markup('<time class="nw" datetime="{iso}" data-shown="iso">{text}</time>')
                       .format(iso=display.iso(parsed), text=text))
    return str(Markup('<span class="nw">{}</span>').format(text))


def _separated(text: str, between: str) -> str:
    escaped = str(escape(text))
    return _SEPARATORS.sub(r"\1<wbr>", escaped) if between else escaped


def breakable(text: str) -> Markup:
    """``text`` escaped, with a line-break opportunity after each ``.``, ``/``, ``:``, ``_`` and
    ``-``: a long dotted name or task wraps between its parts, never inside one. An instant in
    it (a run key's ``name:2026-12-06T…``) is never broken: the line may break before it."""
    return _parts(str(text), "wbr")


def whole_instants(text: object) -> Markup:
    """``text`` escaped, each instant in it kept on one line: free text (a reason, an error)
    wraps at its spaces, never inside ``2026-12-06T15:00:00.123+00:00``."""
    return _parts(str(text), "")


def zone(name: str | None) -> ZoneInfo | None:
    try:
        return ZoneInfo(name) if name else None
    except (ZoneInfoNotFoundError, ValueError):
        return None


def coarse(seconds: float) -> str:
    """A duration as people read it at a glance: ``0.4s``, ``12s``, ``5m12s``, ``2h5m``,
    ``3d4h`` (the exact value is in the title)."""
    if not math.isfinite(seconds):
        return f"{seconds}s"
    value = abs(seconds)
    if value < 10:
        return display.human_seconds(round(value, 1))
    whole = round(value)
    if whole < 3600:
        return display.human_seconds(whole)
    if whole < 86400:
        return display.human_seconds(whole - whole % 60)
    return display.human_seconds(whole - whole % 3600)


def exact(instant: datetime, local: str | None) -> str:
    """``2026-12-04T15:40:01Z UTC · 2026-12-04 16:40:01 CET (Europe/Paris)``."""
    text = f"{display.when(instant)} UTC"
    where = zone(local)
    if where is not None and local != "UTC":
        there = instant.astimezone(where)
        text += f" · {there:%Y-%m-%d %H:%M:%S} {there.tzname()} ({local})"
    return text


def instant(value: datetime | None) -> Markup:
    """An instant shown whole (``2026-12-06T15:00:01Z``, UTC) in a ``<time>`` that the page's
    script (``static/zones.js``) shows in the browser's zone when the person asks for local
    times; ``-`` for none."""
    if value is None:
        return Markup(display.NONE)
    return Markup('<time class="nw" datetime="{iso}" data-shown="iso">{text}</time>').format(
        iso=display.iso(value), text=display.when(value))


def moment(instant: datetime, now: datetime) -> str:
    """``3m ago``, ``in 12s`` or ``now`` (within half a second)."""
    delta = (instant - now).total_seconds()
    if abs(delta) < 0.5:
        return "now"
    return f"in {coarse(delta)}" if delta > 0 else f"{coarse(delta)} ago"


def ago(instant: datetime | None, now: datetime, local: str | None = None) -> Markup:
    """``<time>`` showing ``3m ago`` / ``in 12s``, exact on hover; ``-`` for none."""
    if instant is None:
        return Markup(display.NONE)
    return Markup('<time class="nw" datetime="{iso}" title="{title}">{text}</time>').format(
        iso=display.iso(instant), title=exact(instant, local), text=moment(instant, now))


def state_pill(schedule: Schedule, now: datetime, local: str | None = None) -> Markup:
    """A schedule's state (:func:`~goatbeat_celery.display.state_text`) as a pill; a pause
    with an end reads how long it lasts (``paused until 2h from now``), the exact end on hover."""
    found = schedule.status_at(now)
    if found.state is State.PAUSED_UNTIL and found.until is not None:
        left = (found.until - now).total_seconds()
        text = "now" if left < 0.5 else f"{coarse(left)} from now"
        return pill("paused until", title=f"paused until {exact(found.until, local)}",
                    text=f"paused until {text}")
    return pill(display.state_text(schedule, now))


def local_time(instant: datetime, local: str | None) -> Markup:
    """``2026-12-06 16:00:01 CET`` (milliseconds when it has some), in ``local`` (else UTC), on
    one line: next runs a second apart read apart where ``in 1h`` would read the same."""
    there = instant.astimezone(zone(local) or UTC)
    text = f"{there:%Y-%m-%d %H:%M:%S}"
    if there.microsecond:
        text += f".{there.microsecond // 1000:03d}"
    # The page's script shows it in UTC or the browser's zone when the person asks.
    return Markup('<time class="nw" datetime="{iso}" data-shown="plain">{text}</time>').format(
        iso=display.iso(instant), text=f"{text} {there.tzname()}")


def after(instant: datetime | None, start: datetime | None, local: str | None = None) -> Markup:
    """``instant`` as an offset from ``start`` (``+0.012s``): a run's steps after it fell due."""
    if instant is None or start is None:
        return Markup(display.NONE)
    delta = (instant - start).total_seconds()
    sign = "+" if delta >= 0 else "-"
    text = sign + display.human_seconds(round(abs(delta), 3))
    return Markup('<time class="nw" datetime="{iso}" title="{title}">{text}</time>').format(
        iso=display.iso(instant), title=exact(instant, local), text=text)


def short_key(execution: Execution) -> str:
    """A run's key without its schedule's name (shown beside it): the occurrence's time of day
    in UTC, ``run now`` runs marked; the whole key is on the run page."""
    occurrence = execution.occurrence_at.astimezone(UTC)
    text = f"{occurrence:%m-%d %H:%M:%S}"
    if occurrence.microsecond:
        text += f".{occurrence.microsecond // 1000:03d}"
    return text


def key_time(execution: Execution) -> Markup:
    """:func:`short_key` in a ``<time>`` of the occurrence, which the page's script shows in
    the browser's zone when asked (the whole key, on hover and on the run's page, stays)."""
    # It may wrap between its date and its time, as the text did before it was a <time>.
    return Markup('<time class="key-time" datetime="{iso}" data-shown="short">{text}</time>'
                  ).format(
        iso=display.iso(execution.occurrence_at), text=short_key(execution))


def backfill_of(execution: Execution) -> str | None:
    """``backfill 3`` for a run a backfill made (its key ends ``:backfill-3``), else None."""
    return backfill_of_key(execution.key)


def seconds_text(value: timedelta | float | None) -> str:
    """A runtime to the millisecond; one shorter than half a millisecond reads ``<0.001s``,
    never ``0s`` (the task did run)."""
    if value is None:
        return display.NONE
    number = value.total_seconds() if isinstance(value, timedelta) else value
    if 0 < number < 0.0005:
        return "<0.001s"
    return display.human_seconds(round(number, 3))


def percentiles(runtimes: Sequence[float]) -> list[tuple[str, str]]:
    """``p50``, ``p90``, ``p99`` and ``max`` of ``runtimes`` (nearest rank); empty for none."""
    if not runtimes:
        return []
    ordered = sorted(runtimes)
    found = []
    for rank in PERCENTILES:
        index = max(0, math.ceil(rank / 100 * len(ordered)) - 1)
        found.append((f"p{rank}", seconds_text(ordered[index])))
    found.append(("max", seconds_text(ordered[-1])))
    return found
