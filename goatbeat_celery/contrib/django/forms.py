"""The admin's schedule form: fields a person fills in, validated and saved by
:class:`~goatbeat_celery.api.Schedules`, whose problems are shown on the fields they name."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.db import DatabaseError

from goatbeat_celery import display
from goatbeat_celery.contrib.django import integration
from goatbeat_celery.contrib.django.models import Schedule
from goatbeat_celery.core.rules.policies import OverlapPolicy, ScheduleMode
from goatbeat_celery.core.rules.validation import MAX_REASON_LENGTH, seconds_problem
from goatbeat_celery.core.types.errors import (
    ConfigurationError,
    GoatbeatError,
    ScheduleConflict,
    ScheduleNotFound,
)
from goatbeat_celery.core.types.instants import DURATION_FORMS, parse_duration
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.spec import PLAIN_FIELDS, MisfirePolicy
from goatbeat_celery.spec_input import DURATION_FIELDS, KEYWORD_OF_KIND

KINDS = (("every", "every (interval)"), ("cron", "cron expression"), ("at", "once, at"))
#: Message options with a field of their own; other options a schedule holds are kept as they are.
OPTION_FIELDS = ("queue", "exchange", "routing_key", "priority", "expires", "headers")
#: Fields given to the API as they are cleaned (None when left empty); the durations are read
#: by :meth:`ScheduleForm.duration`.
AS_CLEANED = (*(field.name for field in PLAIN_FIELDS if field.kind != "duration"), "start_at",
              "end_at")
#: Fields of a spec shown under another form field (the trigger's kind is chosen in ``kind``).
_SHOWN_IN = {"trigger": "kind", "cron expression": "cron"}


def duration_field(label: str, help_text: str = "") -> forms.CharField:
    return forms.CharField(label=label, required=False, help_text=help_text or DURATION_FORMS)


def plain_form_fields() -> dict[str, forms.Field]:
    """A form field for each of the spec's plain fields, made from its description; empty
    means unset (the setting, or off)."""
    found: dict[str, forms.Field] = {}
    for field in PLAIN_FIELDS:
        help_text = field.phrase  # as the admin's other help texts read
        if field.unset is not None:
            help_text += f"; empty for {field.unset}"
        if field.kind == "duration":
            found[field.name] = duration_field(field.label, f"{help_text}: {DURATION_FORMS}")
        elif field.kind == "count":
            found[field.name] = forms.IntegerField(required=False, label=field.label,
                                                   help_text=help_text)
        else:
            found[field.name] = forms.FloatField(required=False, label=field.label,
                                                 help_text=help_text)
    return found


class ScheduleForm(forms.ModelForm):
    """Create or edit a database schedule. :meth:`clean` hands the values to
    ``Schedules.create``/``update``: the API alone decides what is valid, and the write happens
    there, so that its problems land on the fields (there is no separate dry run)."""

    name = forms.CharField(max_length=200)
    task = forms.CharField(help_text="the registered task name, e.g. proj.tasks.report")
    kind = forms.ChoiceField(label="runs", choices=KINDS, widget=forms.RadioSelect,
                             initial="every")
    every = duration_field("every", f"the interval: {DURATION_FORMS}")
    cron = forms.CharField(required=False, label="cron",
                           help_text="5 fields: minute hour day-of-month month day-of-week")
    timezone = forms.CharField(required=False, help_text="IANA zone of the cron expression "
                               "(empty: the app's timezone)")
    # Unticked by default: Celery's crontab (and django-celery-beat) match both day fields.
    day_or = forms.BooleanField(
        required=False, initial=False, label="day of month OR day of week",
        help_text="ticked: either restricted day field matches (standard cron); unticked: "
                  "both must match (Celery's crontab)")
    at = forms.DateTimeField(required=False, label="at",
                             help_text="the one instant it runs (in the site's time zone)")
    args = forms.JSONField(required=False, initial=list, help_text='a JSON list, e.g. [1, "a"]')
    kwargs = forms.JSONField(required=False, initial=dict,
                             help_text='a JSON object, e.g. {"limit": 50}')
    queue = forms.CharField(required=False)
    exchange = forms.CharField(required=False)
    routing_key = forms.CharField(required=False)
    priority = forms.IntegerField(required=False)
    expires = duration_field("expires", "a message not started this long after it is sent is "
                             "dropped by the worker")
    headers = forms.JSONField(required=False, initial=dict,
                              help_text="a JSON object of message headers")
    misfire_policy = forms.ChoiceField(
        required=False, label="misfire policy",
        choices=[("", "the global setting"), *((p.value, p.value) for p in MisfirePolicy)])
    # Run policies (docs/run-policies.md; they need run tracking).
    mode = forms.ChoiceField(
        required=False, choices=[(m.value, m.value.replace("_", " ")) for m in ScheduleMode],
        initial=ScheduleMode.FIXED_RATE.value,
        help_text="fixed delay: each run starts this interval after the previous one finished "
                  "(interval schedules only)")
    overlap = forms.ChoiceField(
        required=False, label="overlap policy",
        choices=[("", "the global setting"), *((p.value, p.value) for p in OverlapPolicy)],
        help_text="what a run due while the previous one is still running does")
    # Controls (docs/controls.md).
    start_at = forms.DateTimeField(required=False, label="start at",
                                   help_text="no run due before it (in the site's time zone)")
    end_at = forms.DateTimeField(required=False, label="end at",
                                 help_text="no run due after it")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    tags = forms.CharField(required=False, help_text="labels to filter by, separated by commas")
    calendars = forms.CharField(
        required=False, label="exclusion calendars",
        help_text="names of calendars whose dates it does not run on, separated by commas")
    # Rotation across clusters (docs/scheduling.md).
    rotate = forms.CharField(
        required=False, label="rotate over queues",
        help_text="queues separated by commas: occurrence k goes to queue k mod N, under its "
                  "own key (at least two; not with a queue option)")
    rotate_handover = forms.BooleanField(
        required=False, label="hand over",
        help_text="an occurrence whose queue nobody consumes goes to the next queue somebody "
                  "does (otherwise it waits in its own)")
    enabled = forms.BooleanField(required=False, initial=True)
    reason = forms.CharField(required=False, max_length=MAX_REASON_LENGTH,
                             help_text="why, for the schedule's change log (optional)")
    version = forms.IntegerField(required=False, widget=forms.HiddenInput)
    #: The fields as this page showed them (:func:`shown_values`, as JSON): a refusal because
    #: the definition changed since can then say what changed.
    read = forms.CharField(required=False, widget=forms.HiddenInput)

    class Meta:
        model = Schedule
        fields: tuple[str, ...] = ()

    #: Who the audit log says made the change (the admin sets the signed-in user's name).
    actor: str | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.saved: Any = None
        if self.editing:
            if "name" in self.fields:
                self.fields["name"].disabled = True  # the API renames nothing
            # Over what ModelForm copied from the row's columns of the same names (tags as a
            # list, a mode of NULL): the fields show them as typed.
            self.initial.update(initial_values(self.instance))
            self.initial["read"] = json.dumps(shown_values(self.instance))

    @property
    def editing(self) -> bool:
        """Whether the form edits a stored schedule (rather than adding one)."""
        return not self.instance._state.adding

    def validate_unique(self) -> None:
        """Uniqueness is the API's to judge (ScheduleConflict), in goatbeat's database."""

    def _post_clean(self) -> None:
        # The model instance is a read-only row: nothing of the form is copied onto it.
        pass

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean()
        if self.errors:
            return data
        values = self.api_values(data)
        if self.errors:
            return data
        adding = not self.editing
        try:
            reason = data.get("reason") or None
            with integration.schedules(self.actor) as api:
                if adding:
                    self.saved = api.create(data["name"], data["task"], **values,
                                            reason=reason)
                else:
                    self.saved = api.update(self.instance.pk, task=data["task"],
                                            expected_version=data.get("version"), **values,
                                            reason=reason)
        except ConfigurationError as exc:
            for problem in exc.details:
                self.add_problem(problem)
        except ScheduleConflict:
            if adding:
                self.add_error("name", "a schedule of this name already exists")
            else:
                self.add_error(None, self._changed_since_read(data.get("read"))
                               or "This schedule was changed since this page was opened; "
                                  "reload it and edit again.")
        except ScheduleNotFound:
            self.add_error(None, "This schedule no longer exists.")
        except GoatbeatError as exc:
            self.add_error(None, f"goatbeat's database could not be written: {exc}")
        return data

    def _changed_since_read(self, read: Any) -> str | None:
        """What changed since the page was read, from the fields it showed (None: it sent
        none, or nothing shown differs)."""
        try:
            shown = json.loads(read) if isinstance(read, str) and read else None
            row = type(self.instance).objects.filter(pk=self.instance.pk).first()
        except (ValueError, DatabaseError):
            return None
        if not isinstance(shown, dict) or row is None:
            return None
        return display.changed_since_read(str(self.instance.pk), shown, shown_values(row))

    def api_values(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """The keywords for Schedules.create/update: every field, so an edit replaces them all."""
        kind = data.get("kind")
        values: dict[str, Any] = {
            "every": None, "cron": None, "at": None, "timezone": None,
            "args": tuple(data["args"]) if isinstance(data.get("args"), list)
            else (data.get("args") if data.get("args") is not None else ()),
            "kwargs": data.get("kwargs") if data.get("kwargs") is not None else {},
            "options": self.options(data),
            "misfire_policy": data.get("misfire_policy") or None,
            "overlap": data.get("overlap") or None,
            "mode": data.get("mode") or ScheduleMode.FIXED_RATE.value,
            "description": data.get("description") or None,
            "tags": names_of(data.get("tags")),
            "calendars": names_of(data.get("calendars")),
            "rotate": names_of(data.get("rotate")),
            "rotate_handover": bool(data.get("rotate_handover")),
            "enabled": bool(data.get("enabled")),
            **{key: data.get(key) for key in AS_CLEANED},
        }
        if kind == "every":
            values["every"] = self.duration("every", data.get("every"), required=True)
        elif kind == "cron":
            if not data.get("cron"):
                self.add_error("cron", "give a cron expression")
            values["cron"] = data.get("cron") or None
            values["timezone"] = data.get("timezone") or None
            values["day_or"] = bool(data.get("day_or"))
        elif kind == "at":
            if data.get("at") is None:
                self.add_error("at", "give the instant it runs")
            values["at"] = data.get("at")
        for key in DURATION_FIELDS:
            values[key] = self.duration(key, data.get(key))
        return values

    def options(self, data: Mapping[str, Any]) -> dict[str, Any]:
        kept = {key: value for key, value in (self.instance.options or {}).items()
                if key not in OPTION_FIELDS} if self.editing else {}
        for key in ("queue", "exchange", "routing_key"):
            if data.get(key):
                kept[key] = data[key]
        if data.get("priority") is not None:
            kept["priority"] = data["priority"]
        expires = self.duration("expires", data.get("expires"))
        if expires is not None:
            kept["expires"] = expires.total_seconds()
        if data.get("headers") not in (None, {}, ""):
            kept["headers"] = data["headers"]
        return kept

    def duration(self, key: str, text: Any, *, required: bool = False) -> timedelta | None:
        if text in (None, ""):
            if required:
                self.add_error(key, f"give the interval: {DURATION_FORMS}")
            return None
        try:
            seconds = parse_duration(str(text))
        except ValueError as exc:
            self.add_error(key, str(exc))
            return None
        # Out of a duration's bounds (9 followed by 300 digits) is a problem, not an overflow.
        problem = seconds_problem(seconds, key)
        if problem is not None:
            self.add_error(key, problem.message_as())
            return None
        return timedelta(seconds=seconds)

    def add_problem(self, problem: Problem) -> None:
        """Show one of the API's problems on the field it names, without the field's name."""
        target = field_for(problem, self.cleaned_data.get("kind"))
        if target is None or target not in self.fields:
            self.add_error(None, problem.text)
        else:
            self.add_error(target, problem.said())


# The plain fields join those declared above, as if declared there (the admin's fieldsets
# place them).
_PLAIN_FORM_FIELDS = plain_form_fields()
ScheduleForm.base_fields.update(_PLAIN_FORM_FIELDS)
ScheduleForm.declared_fields.update(_PLAIN_FORM_FIELDS)


def field_for(problem: Problem, kind: Any) -> str | None:
    """The field showing ``problem``: the one it names (``options.queue`` → ``queue`` when the
    form has a field for that option, else ``options``; the trigger → the chosen kind's)."""
    if not problem.field:
        return None
    target = _SHOWN_IN.get(problem.field, problem.root)
    if target == "options" and problem.detail in OPTION_FIELDS:
        return problem.detail
    if target == "kind" and kind in KEYWORD_OF_KIND.values():
        return str(kind)
    return target


def initial_values(row: Schedule) -> dict[str, Any]:
    """A stored row as the form's initial values."""
    trigger = dict(row.trigger or {})
    options = dict(row.options or {})
    kind = KEYWORD_OF_KIND.get(str(trigger.get("kind")))
    values: dict[str, Any] = {
        "name": row.name, "task": row.task, "kind": kind or "every",
        "args": list(row.args or []), "kwargs": dict(row.kwargs or {}),
        "misfire_policy": row.misfire_policy or "",
        "overlap": row.overlap or "", "mode": row.mode or ScheduleMode.FIXED_RATE.value,
        **{field.name: (seconds_text(getattr(row, field.column)) if field.kind == "duration"
                        else getattr(row, field.column)) for field in PLAIN_FIELDS},
        "start_at": row.start_at, "end_at": row.end_at,
        "description": row.description or "",
        "tags": ", ".join(str(tag) for tag in row.tags or ()),
        "calendars": ", ".join(str(name) for name in row.calendars or ()),
        "rotate": ", ".join(str(name) for name in row.rotate or ()),
        "rotate_handover": bool(row.rotate_handover),
        "enabled": row.enabled, "version": row.spec_version,
        "queue": options.get("queue", ""), "exchange": options.get("exchange", ""),
        "routing_key": options.get("routing_key", ""), "priority": options.get("priority"),
        "expires": seconds_text(options.get("expires")),
        "headers": options.get("headers") or {},
    }
    if kind == "every":
        values["every"] = seconds_text(trigger.get("every"))
    elif kind == "cron":
        values["cron"] = trigger.get("expression", "")
        values["timezone"] = trigger.get("timezone", "")
        values["day_or"] = bool(trigger.get("day_or", True))
    elif kind == "at":
        try:
            values["at"] = datetime.fromisoformat(str(trigger.get("at")))
        except ValueError:
            values["at"] = None
    return values


def shown_values(row: Schedule) -> dict[str, str]:
    """The definition's fields as the form shows them, as text: what a person read."""
    values = initial_values(row)
    for key in ("name", "version", "enabled"):  # not the definition, or not a change of it
        values.pop(key, None)
    # When it runs first, as the form shows it.
    first = [key for key in ("task", "kind", "every", "cron", "timezone", "day_or", "at")
             if key in values]
    return {key: _text(values[key]) for key in (*first, *(k for k in values if k not in first))}


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def names_of(text: Any) -> tuple[str, ...]:
    """Tags or calendar names typed separated by commas (a name holds none: the API refuses
    commas in tags, and the CLI lists both this way)."""
    return tuple(part.strip() for part in str(text or "").split(",") if part.strip())


def seconds_text(value: Any) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return ""
    return str(int(value)) if float(value).is_integer() else str(value)
