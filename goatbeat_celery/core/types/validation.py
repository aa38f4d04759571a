"""What a schedule may hold: names, bounded durations, Celery options, args and kwargs.

Every rule is written once here and used at the door (the API, the CLI, config entries) and on
every row the engine reads, so a row written by hand is judged exactly as an API call would be.
Each function returns problems (:class:`~goatbeat_celery.core.types.problems.Problem`: the field,
what is wrong and the fix) instead of raising, so a
caller can report all of them at once.

Why the bounds:

* names: at most :data:`MAX_NAME_LENGTH` characters (an idempotency key adds about 40 to the
  name, and every key must fit a database index), printable (an operator reads them in a
  terminal: no control or bidirectional-override characters);
* intervals: at least :data:`MIN_EVERY` (beat sleeps and wakes; a finer grid only piles work on
  the claim path) and at most :data:`MAX_DURATION`;
* ``misfire_grace``: at most :data:`MAX_GRACE`, which bounds how many on-time points one plan
  may walk;
* every duration is finite: NaN and infinity are refused, never converted;
* instants (``at``, ``start_at``, ``end_at``, a pause's ``until``, a backfill's range): from
  :data:`EARLIEST_INSTANT` to :data:`LATEST_INSTANT`, far enough inside the years a
  ``datetime`` holds that adding a shift, a grace or an interval to one never overflows; a
  trigger's occurrence past :data:`LATEST_INSTANT` is none (the schedule has ended);
* text given to be stored or looked up holds no NUL: no database column can keep one.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.reserved_headers import header_problems

#: Longest schedule (or lease) name, in characters.
MAX_NAME_LENGTH = 200
#: Longest task name, in characters.
MAX_TASK_LENGTH = 255
#: The shortest interval a schedule may have.
MIN_EVERY = timedelta(seconds=1)
#: The longest duration anything may be set to (intervals, expiry, retention).
MAX_DURATION = timedelta(days=3650)
#: The longest misfire grace.
MAX_GRACE = timedelta(days=7)
#: The longest countdown an option may ask for.
MAX_COUNTDOWN = timedelta(days=1)
#: Most occurrences one late schedule may run at once (``max_catchup``): a backlog bigger than
#: a second or so of sending would hold every other schedule's runs behind it.
MAX_CATCHUP = 1_000
#: Largest JSON encoding of args, of kwargs and of options, each (bytes).
MAX_PAYLOAD_BYTES = 65_536
#: Most levels of lists and objects in args, kwargs, options or a request's JSON.
MAX_NESTING = 32
#: Longest reason kept when a schedule is set aside (characters).
MAX_REASON_LENGTH = 500
#: Most tags a schedule may carry, and the longest tag (characters): tags are labels to filter
#: by, shown in a table column, not a place for data.
MAX_TAGS = 20
MAX_TAG_LENGTH = 64
#: Longest description (characters); it is shown beside the schedule, not parsed.
MAX_DESCRIPTION_LENGTH = 2_000
#: Largest ``max_runs``: what the column holds on every backend (a 32-bit integer).
MAX_RUNS = 2_000_000_000
#: The earliest and the latest instant a user may give (``at``, ``start_at``, ``end_at``, a
#: pause's ``until``, a backfill's ``start`` and ``end``), both included. A trigger has no
#: occurrence after :data:`LATEST_INSTANT`.
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST_INSTANT = datetime(9000, 1, 1, tzinfo=timezone.utc)
#: The accepted range as messages and the docs write it.
INSTANT_RANGE = "from 1970-01-01T00:00:00Z to 9000-01-01T00:00:00Z"
#: The most rows one read may ask for (``limit``).
MAX_LIMIT = 1_000_000

# Control (Cc), format (Cf, including bidirectional overrides), line and paragraph separators,
# surrogates, private-use and unassigned code points.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
_HIDDEN_CATEGORIES = HIDDEN_CATEGORIES
# A UTF-16 surrogate: in a str read from JSON, always a lone one (a pair reads as one character).
_SURROGATE = re.compile("[\ud800-\udfff]")
# Printable ASCII without surrounding spaces: most names, checked without a per-character loop.
_PLAIN_NAME = re.compile(r"[!-~](?:[ -~]*[!-~])?")
# Printable ASCII without any space: most task names.
_PLAIN_TASK = re.compile(r"[!-~]+")


def hidden_characters(text: str) -> list[str]:
    """The characters of ``text`` that a terminal would not show as themselves (``U+202E``…)."""
    return [f"U+{ord(char):04X}" for char in text
            if unicodedata.category(char) in _HIDDEN_CATEGORIES]


def name_problems(name: object, label: str = "name") -> list[Problem]:
    """Problems of a schedule or lease name."""
    if not isinstance(name, str):
        return [Problem(label, f"expected a string, got {type(name).__name__}")]
    if len(name) <= MAX_NAME_LENGTH and _PLAIN_NAME.fullmatch(name):
        return []
    found: list[Problem] = []
    if not name.strip():
        return [Problem(label, "must not be empty")]
    if name != name.strip():
        found.append(Problem(label, f"remove the whitespace around {name.strip()[:40]!r}"))
    if len(name) > MAX_NAME_LENGTH:
        found.append(Problem(label, f"{len(name)} characters",
                             f"at most {MAX_NAME_LENGTH} are allowed"))
    hidden = hidden_characters(name)
    if hidden:
        shown = ", ".join(dict.fromkeys(hidden[:5]))
        found.append(Problem(label, f"contains control or invisible characters ({shown})",
                             "use printable characters only"))
    return found


def task_problems(task: object) -> list[Problem]:
    """Problems of a task name."""
    if isinstance(task, str) and len(task) <= MAX_TASK_LENGTH and _PLAIN_TASK.fullmatch(task):
        return []
    if not isinstance(task, str) or not task.strip():
        return [Problem("task", f"must be a registered task name, got {task!r}")]
    if len(task) > MAX_TASK_LENGTH:
        return [Problem("task", f"{len(task)} characters",
                        f"at most {MAX_TASK_LENGTH} are allowed")]
    if task != task.strip() or any(char.isspace() for char in task) or hidden_characters(task):
        return [Problem("task", f"{task[:80]!r} contains spaces or control characters",
                        "give the task's registered name")]
    return []


def instant_problem(value: object, label: str) -> Problem | None:
    """Why ``value`` is not an aware datetime from :data:`EARLIEST_INSTANT` to
    :data:`LATEST_INSTANT` (None when it is)."""
    if not isinstance(value, datetime):
        return Problem(label, f"expected an aware datetime (with a zone), got {shown_value(value)}")
    if value.tzinfo is None or value.utcoffset() is None:
        return Problem(label, f"naive datetime {value.isoformat()} refused",
                       "attach a zone (e.g. datetime(..., tzinfo=timezone.utc))")
    try:
        inside = EARLIEST_INSTANT <= value.astimezone(timezone.utc) <= LATEST_INSTANT
    except OverflowError:  # beyond the years a datetime holds once in UTC
        inside = False
    if not inside:
        return Problem(label, f"{value.isoformat()} is out of range",
                       f"give an instant {INSTANT_RANGE}")
    return None


def limit_problem(value: object, label: str = "limit", *, optional: bool = False
                  ) -> Problem | None:
    """Why ``value`` is not a number of rows to read: an integer from 1 to
    :data:`MAX_LIMIT` (or None, when ``optional``: no limit)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        unset = ", or None for no limit" if optional else ""
        return Problem(label, f"must be an integer from 1 to {MAX_LIMIT}{unset}, got "
                       f"{shown_value(value)}")
    return None


def nul_problem(value: object, label: str) -> Problem | None:
    """Why ``value``, text to look up or filter by, cannot be sent to a database: it holds a
    NUL character (no column can store one). None for anything else."""
    if isinstance(value, str) and "\x00" in value:
        return Problem(label, f"{shown_value(value)} contains a NUL character (U+0000), which "
                       "no stored text can hold", "remove it")
    return None


def finite_number(value: object) -> float | None:
    """``value`` as a float when it is a finite number (an int or a float, not a bool); None
    otherwise, also for an integer beyond a float's range (``10**400``), which a JSON document
    may hold and ``float()`` refuses."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def seconds_problem(value: object, label: str, *, minimum: timedelta = timedelta(0),
                    maximum: timedelta = MAX_DURATION, inclusive_minimum: bool = True
                    ) -> Problem | None:
    """Why ``value`` (seconds or a timedelta) is not a finite duration within the bounds."""
    if type(value) is timedelta and value <= maximum and (
            minimum < value or (inclusive_minimum and value == minimum)):
        return None  # the common case (every due row is judged), compared as it is
    if isinstance(value, timedelta):
        seconds: float = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        return Problem(label, f"expected seconds or a timedelta, got {shown_value(value)}")
    else:
        # An int is compared as it is: one beyond a float's range is out of bounds, not an
        # OverflowError.
        seconds = value
    if isinstance(seconds, float) and not math.isfinite(seconds):
        return Problem(label, f"must be a finite number of seconds, got {value!r}")
    low = minimum.total_seconds()
    if seconds < low or (seconds == low and not inclusive_minimum):
        relation = ">=" if inclusive_minimum else ">"
        return Problem(label, f"must be {relation} {_plain(minimum)}, got "
                       f"{_plain_seconds(seconds)}")
    if seconds > maximum.total_seconds():
        return Problem(label, f"must be at most {_plain(maximum)}, got {_plain_seconds(seconds)}")
    return None


def count_problem(value: object, label: str, *, minimum: int, maximum: int
                  ) -> Problem | None:
    """Why ``value`` is not an integer in ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        return Problem(label, f"must be an integer from {minimum} to {maximum}, got "
                       f"{shown_value(value)}")
    return None


def tags_problems(tags: object, label: str = "tags") -> list[Problem]:
    """Problems of a schedule's tags: a list (or tuple) of at most :data:`MAX_TAGS` distinct,
    non-empty strings of at most :data:`MAX_TAG_LENGTH` printable characters, without
    whitespace or commas (the CLI and the web page list them separated by commas)."""
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)):
        return [Problem(label, f"expected a list of strings, got {shown_value(tags)}",
                        "give e.g. ['billing', 'nightly']")]
    found: list[Problem] = []
    if len(tags) > MAX_TAGS:
        found.append(Problem(label, f"{len(tags)} tags", f"at most {MAX_TAGS} are allowed"))
    for tag in tags:
        problem = _tag_problem(tag)
        if problem is not None:
            message, hint = problem
            found.append(Problem(label, f"{shown_value(tag)} {message}", hint))
    repeated = sorted({tag for tag in tags if isinstance(tag, str) and tags.count(tag) > 1})
    if repeated:
        found.append(Problem(label, f"{', '.join(map(repr, repeated))} given more than once",
                             "give each tag once"))
    return found


def _tag_problem(tag: object) -> tuple[str, str] | None:
    """What is wrong with ``tag`` and the fix (None when nothing is)."""
    if not isinstance(tag, str):
        return "is not a string", "give each tag as text"
    if not tag:
        return "is empty", "give each tag at least one character"
    if len(tag) > MAX_TAG_LENGTH:
        return f"has {len(tag)} characters", f"at most {MAX_TAG_LENGTH} are allowed"
    if any(char.isspace() or char == "," for char in tag):
        return "contains whitespace or a comma", "use letters, digits, '-', '_', ':' or '.'"
    if hidden_characters(tag):
        return "contains control or invisible characters", "use printable characters only"
    return None


def description_problem(text: object, label: str = "description") -> Problem | None:
    """Why ``text`` is not a description: not a string, longer than
    :data:`MAX_DESCRIPTION_LENGTH`, or holding control characters other than line breaks and
    tabs (a terminal would act on them)."""
    if not isinstance(text, str):
        return Problem(label, f"expected text, got {shown_value(text)}")
    if len(text) > MAX_DESCRIPTION_LENGTH:
        return Problem(label, f"{len(text)} characters",
                       f"at most {MAX_DESCRIPTION_LENGTH} are allowed")
    if hidden_characters(text.replace("\n", "").replace("\t", "")):
        return Problem(label, "contains control or invisible characters",
                       "use printable text (line breaks and tabs are fine)")
    return None


def _plain(value: timedelta) -> str:
    return _plain_seconds(value.total_seconds())


def _plain_seconds(seconds: float) -> str:
    if finite_number(seconds) is None:
        return shown_value(seconds)
    if seconds >= 86_400 and seconds % 86_400 == 0:
        days = seconds / 86_400
        return f"{days:g} day" if days == 1 else f"{days:g} days"
    return f"{seconds:g}s"


# -- Celery options ------------------------------------------------------------------------
def _text(value: object) -> str | None:
    if not isinstance(value, str) or not value or len(value) > MAX_TASK_LENGTH:
        return f"expected a non-empty string of at most {MAX_TASK_LENGTH} characters"
    hidden = hidden_characters(value)
    if hidden:
        # A queue, exchange or routing key is a name a broker and an operator read: a control
        # character (a NUL no database stores, an escape a terminal acts on) is a mistake.
        shown = ", ".join(dict.fromkeys(hidden[:5]))
        return (f"contains control or invisible characters ({shown}); use printable "
                "characters only")
    return None


def _priority(value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
        return "expected an integer from 0 to 255"
    return None


def _flag(value: object) -> str | None:
    return None if isinstance(value, bool) else "expected true or false"


def _seconds_option(maximum: timedelta, *, zero: bool) -> Any:
    low = "0" if zero else "more than 0"

    def check(value: object) -> str | None:
        if seconds_problem(value, "", maximum=maximum, inclusive_minimum=zero) is None:
            return None
        return f"expected a finite number of seconds, {low} and at most {_plain(maximum)}"
    return check


def _headers(value: object) -> str | None:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        return "expected an object with string keys"
    return None


def _delivery_mode(value: object) -> str | None:
    if value in (1, 2, "persistent", "transient") and not isinstance(value, bool):
        return None
    return "expected 1, 2, 'persistent' or 'transient'"


#: The ``apply_async`` options a stored schedule may carry, each with its check.
OPTION_CHECKS: Mapping[str, Any] = {
    "queue": _text,
    "exchange": _text,
    "routing_key": _text,
    "priority": _priority,
    "expires": _seconds_option(MAX_DURATION, zero=False),
    "countdown": _seconds_option(MAX_COUNTDOWN, zero=True),
    "time_limit": _seconds_option(MAX_DURATION, zero=False),
    "soft_time_limit": _seconds_option(MAX_DURATION, zero=False),
    "serializer": _text,
    "compression": _text,
    "headers": _headers,
    "shadow": _text,
    "ignore_result": _flag,
    "delivery_mode": _delivery_mode,
}

#: Options refused with the reason why (others are refused as unknown).
REFUSED_OPTIONS: Mapping[str, str] = {
    "task_id": "goatbeat sets the task id to each occurrence's idempotency key",
    "retry": "goatbeat retries a refused message itself, under the same key",
    "retry_policy": "goatbeat retries a refused message itself, under the same key",
    "eta": "an absolute instant would apply to every run; use countdown",
    "link": "callbacks cannot be stored with a schedule; chain them in the task",
    "link_error": "callbacks cannot be stored with a schedule; chain them in the task",
    "producer": "goatbeat chooses the producer",
    "connection": "goatbeat chooses the connection",
}


def options_problems(options: object, label: str = "options", *,
                     stored: bool = False) -> list[Problem]:
    """Problems of a schedule's ``options``: only the keys listed in :data:`OPTION_CHECKS`,
    each of its type, and no header only Celery or goatbeat may set
    (:mod:`~goatbeat_celery.core.rules.headers`).

    ``stored=True`` judges options read from a row: such headers are no problem there, as the
    submitter drops them from rows written before they were refused."""
    if type(options) is not dict and not isinstance(options, Mapping):
        return [Problem(label, "expected an object of apply_async options, got "
                        f"{type(options).__name__}")]
    found: list[Problem] = []
    if not options:
        return found
    for key, value in options.items():
        check = OPTION_CHECKS.get(key) if isinstance(key, str) else None
        if check is None:
            reason = REFUSED_OPTIONS.get(key) if isinstance(key, str) else None
            hint = ""
            if reason is None:
                reason, hint = "unknown option", f"supported: {', '.join(sorted(OPTION_CHECKS))}"
            found.append(Problem(f"{label}.{key}", reason, hint))
            continue
        problem = check(value)
        if problem is not None:
            found.append(Problem(f"{label}.{key}", f"{problem}, got {shown_value(value)}"))
        elif key == "headers" and not stored:
            found.extend(header_problems(value, f"{label}.headers"))
    return found


# -- args and kwargs -----------------------------------------------------------------------
def call_problems(args: object, kwargs: object) -> list[Problem]:
    """Problems of the shapes of ``args`` (a list) and ``kwargs`` (an object, string keys)."""
    found: list[Problem] = []
    # The exact types first: this runs for every due row and every message.
    if type(args) is not tuple and not isinstance(args, (list, tuple)):
        found.append(Problem("args", f"expected a list, got {type(args).__name__} "
                             f"{shown_value(args)}"))
    if type(kwargs) is not dict and not isinstance(kwargs, Mapping):
        found.append(Problem("kwargs", f"expected an object, got {type(kwargs).__name__} "
                             f"{shown_value(kwargs)}"))
    elif kwargs and not all(isinstance(key, str) for key in kwargs):
        found.append(Problem("kwargs", "every key must be a string"))
    return found


def payload_problems(label: str, value: object) -> list[Problem]:
    """Whether ``value`` reads back unchanged from JSON and is at most
    :data:`MAX_PAYLOAD_BYTES` encoded (checked at the door; rows already are JSON)."""
    shape = json_shape_problem(value, label)
    if shape is not None:
        return [shape]
    try:
        text = json.dumps(value, allow_nan=False)
    except RecursionError:
        return [Problem(label, "nested too deeply to be stored")]
    except (TypeError, ValueError) as exc:
        return [Problem(label, f"must be JSON-serialisable ({exc})")]
    if json.loads(text) != value:
        return [Problem(label, "must be JSON-serialisable (a value would not read back "
                        "unchanged: tuples, non-string keys?)")]
    changed = _unfaithful_number(value)
    if changed is not None:
        return [Problem(label, f"{changed!r} would not read back unchanged from the database",
                        "give it as an integer, or as a float the database keeps exactly")]
    if "\\u0000" in text:
        return [Problem(label, "contains a NUL character, which cannot be stored")]
    size = len(text.encode())
    if size > MAX_PAYLOAD_BYTES:
        return [Problem(label, f"{size} bytes as JSON",
                        f"at most {MAX_PAYLOAD_BYTES} are allowed "
                        "(pass a reference to the data instead)")]
    return []


def json_shape_problem(value: object, label: str) -> Problem | None:
    """Why JSON ``value`` cannot be stored whatever its size: lists and objects nested more
    than :data:`MAX_NESTING` levels deep (every reader and writer of JSON on its way recurses
    once a level), or text holding a lone surrogate (``"\\ud800"`` in JSON), which UTF-8 cannot
    encode and no database stores. Walked without recursion, so any depth is judged."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return Problem(label, f"text {shown_value(item)} holds a lone surrogate, "
                               "which cannot be stored", "send text as UTF-8 characters")
            continue
        if isinstance(item, Mapping):
            children: list[object] = [*item.keys(), *item.values()]
        elif isinstance(item, (list, tuple)):
            children = list(item)
        else:
            continue
        if depth >= MAX_NESTING:
            return Problem(label, f"nested too deeply: more than {MAX_NESTING} levels of "
                           "lists and objects", "flatten it, or pass a reference to the data")
        stack.extend((child, depth + 1) for child in children)
    return None


def _unfaithful_number(value: object) -> float | None:
    """A float that a database's JSON number type would not give back as the same float:
    -0.0 (read back as 0) and integral floats beyond 2**53 (read back as integers)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if (item == 0 and math.copysign(1.0, item) < 0) or (
                    item.is_integer() and abs(item) >= 2 ** 53):
                return item
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None


def shown_value(value: object, width: int = 60) -> str:
    """``value`` as messages quote it: its repr (quoted and escaped), cut to ``width``; an
    integer too long to write out (Python refuses past 4,300 digits) by its size."""
    try:
        text = repr(value)
    except ValueError:
        text = f"an integer of {value.bit_length() if isinstance(value, int) else '?'} bits"
    return text if len(text) <= width else text[:width - 3] + "..."


_T = TypeVar("_T")
_D = TypeVar("_D")
_KINDS = {int: "an integer", float: "a number", str: "text"}


def stored_value(value: object, kind: type[_T], default: _D, label: str, damage: list[Problem], *,
                 required: bool = False, what: str | None = None) -> _T | _D:
    """A stored column's ``value`` if it is exactly of ``kind`` (a bool is no integer), else
    ``default``, with the value named under ``label`` in ``damage``: a column holding another
    type was written by hand, and reads as unset. None (unset) reads as ``default`` too, named
    only when ``required``; ``what`` names what the value should be (by default, its kind)."""
    if value is None and not required:
        return default
    if type(value) is kind:
        return value
    shown = reason_text(shown_value(value))
    damage.append(Problem(label, f"{shown} is not {what or _KINDS.get(kind, kind.__name__)}"))
    return default


def reason_text(text: str) -> str:
    """``text`` fit to be stored and shown as a reason: control characters escaped, bounded."""
    if hidden_characters(text):
        text = "".join(char if unicodedata.category(char) not in _HIDDEN_CATEGORIES
                       else f"\\u{ord(char):04x}" for char in text)
    if len(text) > MAX_REASON_LENGTH:
        text = text[:MAX_REASON_LENGTH - 3] + "..."
    return text


#: The most calendars one schedule observes.
MAX_CALENDARS = 20
MAX_CALENDAR_NAME_LENGTH = 64
# Calendar names are listed separated by commas and given as command-line words.
_CALENDAR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


def calendar_name_problems(name: object, label: str = "name") -> list[Problem]:
    """Problems of a calendar name: 1 to 64 letters, digits, ``-``, ``_``, ``.`` or ``:``,
    starting with a letter or digit."""
    if not isinstance(name, str):
        return [Problem(label, f"expected a string, got {shown_value(name)}")]
    if not name:
        return [Problem(label, "must not be empty")]
    found: list[Problem] = []
    if len(name) > MAX_CALENDAR_NAME_LENGTH:
        found.append(Problem(label, f"{len(name)} characters",
                             f"at most {MAX_CALENDAR_NAME_LENGTH} are allowed"))
    if not _CALENDAR_NAME.fullmatch(name):
        found.append(Problem(label, f"{shown_value(name)} is not a calendar name",
                             "use letters, digits, '-', '_', '.' or ':', starting with a "
                             "letter or digit"))
    return found


def calendars_problems(names: object, label: str = "calendars") -> list[Problem]:
    """Problems of the calendar names a schedule observes: a list of distinct names."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        return [Problem(label, f"expected a list of calendar names, got {shown_value(names)}",
                        "give e.g. ['holidays']")]
    found: list[Problem] = []
    if len(names) > MAX_CALENDARS:
        found.append(Problem(label, f"{len(names)} calendars",
                             f"at most {MAX_CALENDARS} are allowed"))
    for name in names:
        found.extend(calendar_name_problems(name, label))
    repeated = sorted({n for n in names if isinstance(n, str) and names.count(n) > 1})
    if repeated:
        found.append(Problem(label, f"{', '.join(map(repr, repeated))} given more than once",
                             "give each calendar once"))
    return found
