"""The admin pages for goatbeat: schedules (listed, searched, filtered, edited, paused, resumed,
run now), their executions (history, read only) and alerts (read only).

Lists come from goatbeat's tables through unmanaged models, read from the ``DATABASES`` alias
that names goatbeat's database; every change goes through
:class:`~goatbeat_celery.api.Schedules`. Schedules from ``beat_schedule`` are shown read-only:
config is their source of truth (they can still be run now).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote
from django.db import connections
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.db.models.expressions import RawSQL
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.html import format_html, format_html_join

from goatbeat_celery import display
from goatbeat_celery.contrib.django import integration
from goatbeat_celery.contrib.django.forms import ScheduleForm
from goatbeat_celery.contrib.django.models import Alert, Execution, Schedule
from goatbeat_celery.core.rules.status import Status, shows_next_run, status
from goatbeat_celery.core.types.errors import ConfigurationError, GoatbeatError, ScheduleNotFound
from goatbeat_celery.core.types.fields import Group
from goatbeat_celery.core.types.spec import PLAIN_FIELDS, TriggerSpec
from goatbeat_celery.store.schema import SCHEDULE_TAG_TABLE

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules

T = TypeVar("T")

CONFIG_READ_ONLY = "comes from beat_schedule: change it in the Celery config"
#: Runs the change page of a schedule lists, newest first (the executions' list has them all).
HISTORY_LENGTH = 10
#: Changes the change page of a schedule lists, newest first (``goatbeat audit`` has them all).
CHANGES_LENGTH = 10
#: Most tags the tag filter offers.
MAX_TAG_CHOICES = 200


class GoatbeatReadMixin:
    """Reads from the alias of goatbeat's database (the default one unless it is elsewhere)."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)  # type: ignore[misc]
        alias = integration.database_alias()
        if alias is None:
            messages.error(request, "goatbeat's database is none of DATABASES: add it there "
                           "so the admin can read it (`manage.py check --database default`).")
            return queryset.none()
        return queryset.using(alias)


class ReadOnlyMixin:
    """Rows goatbeat writes itself (runs, alerts): shown, never added, changed or deleted."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class StateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("enabled", "enabled"), ("paused", "paused"), ("set_aside", "set aside"),
                ("failing", "failing (failures in a row)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        # A pause with an end keeps the schedule enabled: it is paused until that instant.
        paused = Q(enabled=False) | Q(paused_until__gt=timezone.now())
        if value == "enabled":
            return queryset.filter(fault__isnull=True).exclude(paused)
        if value == "paused":
            return queryset.filter(paused)
        if value == "set_aside":
            return queryset.filter(fault__isnull=False)
        if value == "failing":
            return queryset.filter(consecutive_failures__gt=0)
        return queryset


class TagFilter(admin.SimpleListFilter):
    """Schedules carrying one tag. Both the choices (the first :data:`MAX_TAG_CHOICES`
    distinct tags, in code point order) and the match are read from goatbeat's tag index
    (``goatbeat_schedule_tag``, one row per tag a schedule carries), whose (tag, name) index
    answers each without reading the schedules."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        alias = integration.database_alias()
        if alias is None:
            return []  # the list says why, once
        connection = connections[alias]
        table = connection.ops.quote_name(SCHEDULE_TAG_TABLE)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT DISTINCT tag FROM {table} ORDER BY tag LIMIT %s",
                           [MAX_TAG_CHOICES])
            return [(tag, tag) for (tag,) in cursor.fetchall()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        table = connections[queryset.db].ops.quote_name(SCHEDULE_TAG_TABLE)
        # The index has no model: its key is the pair (schedule_name, tag), which Django
        # models cannot declare before 5.2.
        return queryset.filter(name__in=RawSQL(
            f"SELECT schedule_name FROM {table} WHERE tag = %s", (value,)))


def describe_trigger(row: Schedule) -> str:
    """The trigger as every face describes it (``every 10m``, ``cron 0 7 * * * in
    Europe/Paris: At 07:00 AM``, ``solar sunrise at 48.85°N 2.35°E``), or as stored."""
    from goatbeat_celery.display import trigger_text

    try:
        spec = TriggerSpec.from_json(dict(row.trigger or {}))
    except (ConfigurationError, KeyError, TypeError, ValueError):
        return f"{row.trigger!r} (not readable)"
    return trigger_text(spec)


def status_of(row: Schedule) -> Status:
    """The row's status, as every face works it out (:mod:`goatbeat_celery.core.rules.status`)."""
    runs_left = None if row.max_runs is None else max(0, row.max_runs - row.total_runs)
    return status(enabled=row.enabled, paused_until=row.paused_until,
                  paused_reason=row.paused_reason, fault=row.fault, unreadable=False,
                  next_run_at=row.next_run_at, runs_left=runs_left, end_at=row.end_at,
                  now=timezone.now())


def state_of(row: Schedule) -> str:
    """The row's status in words, with its reason (why it was set aside or paused) and until
    when a pause lasts; with the failed runs in a row, if any."""
    found = status_of(row)
    text = found.state.value
    if found.until is not None:
        text += f" {found.until.isoformat(timespec='seconds')}"
    if found.reason:
        text += f": {found.reason}"
    if row.consecutive_failures:
        noun = "failure" if row.consecutive_failures == 1 else "failures"
        text += f" ({row.consecutive_failures} {noun} in a row)"
    return text


def last_run_at(row: Schedule) -> datetime | None:
    """When the last run was due, and sent: its occurrence shifted by the schedule's offset or
    jitter, as the next run is shown (the occurrence, the grid point, is what its task id
    names). Read from its execution; once the retention pruned that, the shift is the
    schedule's own."""
    found = getattr(row, "last_due_at", None)
    if isinstance(found, datetime):
        return found
    last: datetime | None = row.last_occurrence_at
    return None if last is None else last + row.shift()


def _plain(group: Group) -> tuple[str, ...]:
    """The form fields of the spec's plain fields in ``group``."""
    return tuple(field.name for field in PLAIN_FIELDS if field.group == group)


@admin.register(Schedule)
class ScheduleAdmin(GoatbeatReadMixin, admin.ModelAdmin):
    form = ScheduleForm
    list_display = ("name", "task", "runs", "next_run", "last_run", "state", "source_shown",
                    "tags_shown")
    list_filter = (StateFilter, "source", TagFilter)
    search_fields = ("name", "task", "description")
    actions = ("pause_schedules", "resume_schedules", "run_now", "delete_selected")
    list_per_page = 100
    save_as = False
    fieldsets = (
        (None, {"fields": ("name", "task", "enabled", "version", "read")}),
        ("When", {"fields": ("kind", "every", "cron", "timezone", "day_or", "at")}),
        ("Call", {"fields": ("args", "kwargs")}),
        ("Message options", {"fields": ("queue", "exchange", "routing_key", "priority",
                                        "expires", "headers")}),
        ("Lateness", {"classes": ("collapse",), "fields": (
            "misfire_policy", *_plain("lateness"))}),
        ("Run policies", {"classes": ("collapse",), "fields": (
            "mode", "overlap", *_plain("policies"))}),
        ("Controls", {"classes": ("collapse",), "fields": (
            "start_at", "end_at", *_plain("controls"), "description", "tags", "calendars")}),
        ("Alerts", {"classes": ("collapse",), "fields": _plain("alerts")}),
        ("Rotation", {"classes": ("collapse",), "fields": ("rotate", "rotate_handover")}),
        ("Change log", {"fields": ("reason",)}),
    )
    #: What the change page of a stored schedule shows above the form: how it is doing (the
    #: state says until when and why it is paused).
    status_shown = ("state", "next_run", "last_run", "consecutive_failures", "counts")
    readonly_shown = ("name", "task", "runs", "next_run", "last_run", "state", "source_shown",
                      "description", "tags_shown", "args", "kwargs", "options",
                      "misfire_policy", *(field.column for field in PLAIN_FIELDS), "mode",
                      "overlap", "start_at", "end_at", "calendars", "rotate", "rotate_handover",
                      "total_runs", "total_missed",
                      "total_skipped", "created_at", "updated_at")
    #: Below the form: its last runs and its last changes, read-only.
    history_shown = ("history", "changes")

    # -- columns -------------------------------------------------------------------------
    @admin.display(description="runs")
    def runs(self, row: Schedule) -> str:
        return describe_trigger(row)

    @admin.display(description="next run", ordering="next_run_at")
    def next_run(self, row: Schedule) -> Any:
        return row.next_run_at if shows_next_run(status_of(row).state) else None

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # The last run as beat sent it: its execution's due instant, read through the
        # (schedule_name, occurrence_at) index for the whole page at once.
        sent = Execution.objects.filter(schedule_name=OuterRef("name"), manual=False,
                                        occurrence_at=OuterRef("last_occurrence_at"))
        return super().get_queryset(request).annotate(
            last_due_at=Subquery(sent.order_by("claimed_at").values("due_at")[:1]))

    @admin.display(description="last run", ordering="last_occurrence_at")
    def last_run(self, row: Schedule) -> Any:
        return last_run_at(row)

    @admin.display(description="state")
    def state(self, row: Schedule) -> str:
        text = state_of(row)
        if row.fault is not None:
            return str(format_html('<span style="color:#ba2121">{}</span>', text))
        return text

    @admin.display(description="source", ordering="source")
    def source_shown(self, row: Schedule) -> str:
        return "config (beat_schedule)" if row.is_config else "database"

    @admin.display(description="tags")
    def tags_shown(self, row: Schedule) -> str:
        return ", ".join(str(tag) for tag in row.tags or ())

    @admin.display(description="last runs")
    def history(self, row: Schedule) -> str:
        """The last runs, newest first: when, whether someone asked for it, its outcome (what
        a worker reported, else beat's dispatch state) and its error, through the API."""
        runs = read_through_api(lambda api: api.history(row.name, limit=HISTORY_LENGTH))
        if isinstance(runs, str):
            return runs
        if not runs:
            return "none yet"
        # Each run when it was due (and sent), as the last and next runs are shown, with its
        # task id: the key, which names the occurrence before the offset or jitter.
        lines = format_html_join(
            "", "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>", (
                (formats.localize(timezone.localtime(run.due_at)), run.key,
                 "run now" if run.manual else "", display.run_status(run),
                 shortened(run.run_error or run.last_error, 200)) for run in runs))
        everything = reverse("admin:goatbeat_execution_changelist",
                             current_app=self.admin_site.name)
        return str(format_html(
            '<table class="goatbeat-history"><thead><tr><th>due</th><th>task id</th>'
            '<th>asked by</th>'
            '<th>outcome</th><th>error</th></tr></thead><tbody>{}</tbody></table>'
            '<p><a href="{}?{}">all its runs</a></p>', lines, everything,
            urlencode({"schedule": row.name})))

    @admin.display(description="last changes")
    def changes(self, row: Schedule) -> str:
        """The audit log's newest entries of the schedule: when, what, who, why, and each
        field changed, through the API."""
        entries = read_through_api(lambda api: api.audit(row.name, limit=CHANGES_LENGTH))
        if isinstance(entries, str):
            return entries
        if not entries:
            return "none recorded"
        lines = format_html_join(
            "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", (
                (formats.localize(timezone.localtime(entry.at)),
                 display.audit_action(entry.action), entry.actor,
                 shortened(display.audit_changes_text(entry.changes), 300),
                 entry.reason or "") for entry in entries))
        return str(format_html(
            '<table class="goatbeat-audit"><thead><tr><th>when</th><th>action</th><th>by</th>'
            '<th>what changed</th><th>reason</th></tr></thead><tbody>{}</tbody></table>'
            '<p>all of them: <code>celery -A proj goatbeat audit {}</code></p>', lines,
            row.name))

    @admin.display(description="runs so far")
    def counts(self, row: Schedule) -> str:
        text = f"{row.total_runs} run, {row.total_missed} missed, {row.total_skipped} skipped"
        if row.max_runs is not None:
            text += f" (at most {row.max_runs} runs)"
        return text

    # -- permissions: config rows are read-only ------------------------------------------
    def has_change_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        if obj is not None and obj.is_config:
            return False
        return bool(super().has_change_permission(request, obj))

    def has_delete_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        if obj is not None and obj.is_config:
            return False
        return bool(super().has_delete_permission(request, obj))

    def get_form(self, request: HttpRequest, obj: Schedule | None = None,
                 change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        # The form makes the API call (see below): it names the signed-in user.
        return type(form.__name__, (form,), {"actor": integration.django_actor(request)})

    def get_fieldsets(self, request: HttpRequest, obj: Schedule | None = None) -> Any:
        history = ("History", {"fields": self.history_shown})
        if obj is not None and not self.has_change_permission(request, obj):
            return ((None, {"fields": self.readonly_shown}), history)
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None:
            return fieldsets
        return (("Status", {"fields": self.status_shown}), *fieldsets, history)

    def get_readonly_fields(self, request: HttpRequest, obj: Schedule | None = None) -> Any:
        if obj is not None and not self.has_change_permission(request, obj):
            return (*self.readonly_shown, *self.history_shown)
        return (*self.status_shown, *self.history_shown) if obj is not None else ()

    # -- writing: the form wrote through the API already ---------------------------------
    # ScheduleForm.clean() makes the API call, so that the API's problems land on the fields
    # (the API alone validates, and has no dry run). What the admin does after a valid form
    # cannot fail on goatbeat's account: save_model only takes the saved name as the key,
    # there are no inlines (save_related does nothing), and the history entry and the
    # redirect use that name alone.
    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        obj.pk = form.saved.name if form.saved is not None else obj.pk
        if form.saved is not None:
            warning = integration.unknown_task_warning(form.saved.spec.task)
            if warning is not None:
                messages.warning(request, warning)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any,
                     change: bool) -> None:
        pass

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        """The delete page's deletion. A schedule deleted meanwhile (between the page's read
        and this call) is gone all the same, and a database that cannot be reached deletes
        nothing: either way a message says so, and response_delete claims no success."""
        try:
            with integration.schedules(integration.django_actor(request)) as api:
                api.delete(obj.name)
        except ScheduleNotFound:
            messages.warning(request, f"{obj.name!r} was already deleted.")
        except GoatbeatError as exc:
            messages.error(request, f"{obj.name!r} was not deleted: {exc}")
        else:
            return
        request.goatbeat_not_deleted = True

    def response_delete(self, request: HttpRequest, obj_display: str,
                        obj_id: Any) -> HttpResponse:
        if getattr(request, "goatbeat_not_deleted", False):
            return HttpResponseRedirect(reverse("admin:goatbeat_schedule_changelist",
                                                current_app=self.admin_site.name))
        return super().response_delete(request, obj_display, obj_id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._each(request, queryset, "deleted", lambda api, row: api.delete(row.name))

    # -- actions -------------------------------------------------------------------------
    @admin.action(description="Pause selected schedules", permissions=["change"])
    def pause_schedules(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._each(request, queryset, "paused", lambda api, row: api.pause(row.name))

    @admin.action(description="Resume selected schedules", permissions=["change"])
    def resume_schedules(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._each(request, queryset, "resumed", lambda api, row: api.resume(row.name))

    @admin.action(description="Run selected schedules now", permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._each(request, queryset, "queued to run now",
                   lambda api, row: api.run_now(row.name), config_too=True)

    @admin.action(description="Delete selected schedules", permissions=["delete"])
    def delete_selected(self, request: HttpRequest,
                        queryset: QuerySet[Any]) -> TemplateResponse | None:
        """Django's own action, through the API: a page listing the schedules to delete (those
        of beat_schedule left out, with a warning) with Django's confirmation template, then,
        once confirmed, the deletion, an admin log entry for each schedule deleted and back to
        the list. Executions stay, as history."""
        rows = list(queryset)
        deletable = [row for row in rows if not row.is_config]
        if request.POST.get("post"):
            deleted = set(self._each(request, rows, "deleted",
                                     lambda api, row: api.delete(row.name)))
            log_deletions(self, request, [row for row in rows if row.name in deleted])
            return None
        for row in rows:
            if row.is_config:
                messages.warning(request, f"{row.name!r} will not be deleted: it "
                                 f"{CONFIG_READ_ONLY}.")
        if not deletable:
            return None
        opts = self.model._meta
        noun = "schedule" if len(deletable) == 1 else "schedules"
        listed = [format_html('Schedule: <a href="{}">{}</a>',
                              reverse("admin:goatbeat_schedule_change", args=(quote(row.name),),
                                      current_app=self.admin_site.name), row.name)
                  for row in deletable]
        context = {
            **self.admin_site.each_context(request),
            "title": "Delete multiple objects",
            "subtitle": None,
            "objects_name": noun,
            "deletable_objects": [listed],
            "model_count": [("schedules", len(deletable))],
            "queryset": deletable,
            "perms_lacking": (),
            "protected": (),
            "opts": opts,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/delete_selected_confirmation.html", context)

    def _each(self, request: HttpRequest, rows: Iterable[Schedule], done: str,
              change: Callable[[Any, Schedule], Any], *,
              config_too: bool = False) -> list[str]:
        """Apply ``change`` to each row through the API; one message for those it was applied
        to, and one per row refused, with the reason. The names it was applied to."""
        changed: list[str] = []
        try:
            with integration.schedules(integration.django_actor(request)) as api:
                for row in rows:
                    if row.is_config and not config_too:
                        messages.warning(request, f"{row.name!r} was not {done}: it "
                                         f"{CONFIG_READ_ONLY}.")
                        continue
                    try:
                        change(api, row)
                    except ConfigurationError as exc:
                        messages.error(request, f"{row.name!r} was not {done}: "
                                       + "; ".join(exc.problems))
                    except GoatbeatError as exc:
                        messages.error(request, f"{row.name!r} was not {done}: {exc}")
                    else:
                        changed.append(row.name)
        except GoatbeatError as exc:
            messages.error(request, f"goatbeat's database could not be reached: {exc}")
        if changed:
            shown = ", ".join(repr(name) for name in changed[:10])
            more = f" and {len(changed) - 10} more" if len(changed) > 10 else ""
            noun = "schedule" if len(changed) == 1 else "schedules"
            messages.success(request, f"{len(changed)} {noun} {done}: {shown}{more}.")
        return changed


def log_deletions(model_admin: admin.ModelAdmin, request: HttpRequest,
                  rows: list[Schedule]) -> None:
    """Admin log entries for deleted schedules, as Django's delete_selected writes them (its
    ``log_deletions`` is Django 5.1's; ``log_deletion``, one at a time, before it)."""
    if not rows:
        return
    if hasattr(model_admin, "log_deletions"):
        model_admin.log_deletions(request, rows)
    else:
        for row in rows:
            model_admin.log_deletion(request, row, str(row))


class ScheduleNameFilter(admin.SimpleListFilter):
    """Executions of one schedule; the choices are the schedules that exist now (searching by
    name finds the history of deleted ones)."""

    title = "schedule"
    parameter_name = "schedule"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        alias = integration.database_alias()
        if alias is None:
            return []
        names = Schedule.objects.using(alias).order_by("name").values_list("name", flat=True)
        return [(name, name) for name in names[:200]]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(schedule_name=value) if value else queryset


@admin.register(Execution)
class ExecutionAdmin(GoatbeatReadMixin, ReadOnlyMixin, admin.ModelAdmin):
    # The key is the task id and names the occurrence; the run was due, and sent, at due_at,
    # after the schedule's offset or jitter.
    list_display = ("key", "schedule_name", "due_at", "occurrence_at", "state", "attempts",
                    "origin", "submitted_at", "error", "run", "worker", "runtime_shown")
    list_filter = (ScheduleNameFilter, "state", "run_state", "manual")
    search_fields = ("schedule_name", "key")
    date_hierarchy = "occurrence_at"
    list_per_page = 100
    show_full_result_count = False
    readonly_fields = ("key", "schedule_name", "occurrence_at", "due_at", "state", "claimed_at",
                       "submitted_at", "attempts", "last_error", "missed", "manual",
                       "expires_at", "token", "cluster", "run_state", "run_id", "worker",
                       "run_attempts", "started_at", "finished_at", "heartbeat_at", "runtime",
                       "run_error")
    fields = readonly_fields

    @admin.display(description="asked by", ordering="manual")
    def origin(self, row: Execution) -> str:
        """"run now" for a run someone asked for; empty for the schedule's own runs (a red
        cross on each of those would read as a failure)."""
        return "run now" if row.manual else ""

    @admin.display(description="last error")
    def error(self, row: Execution) -> str:
        return shortened(row.last_error)

    @admin.display(description="run", ordering="run_state")
    def run(self, row: Execution) -> str:
        """What workers did with it, with the worker's error after a failure; empty until a
        worker reports it started (and always, where workers do not track runs)."""
        if row.run_state is None:
            return ""
        if row.run_error:
            return f"{row.run_state}: {shortened(row.run_error)}"
        return str(row.run_state)

    @admin.display(description="runtime", ordering="runtime")
    def runtime_shown(self, row: Execution) -> str:
        return "" if row.runtime is None else f"{row.runtime:.3f}s"


@admin.register(Alert)
class AlertAdmin(GoatbeatReadMixin, ReadOnlyMixin, admin.ModelAdmin):
    """Alerts (docs/alerts.md), open ones first, read only: the leader raises and resolves
    them."""

    list_display = ("id", "schedule_name", "rule", "state", "count", "first_at", "last_at",
                    "resolved_at", "reason_shown")
    list_filter = ("state", "rule", ScheduleNameFilter)
    search_fields = ("schedule_name", "reason")
    list_per_page = 100
    # Who acknowledged or silenced it: the dashboard, the CLI and the HTTP API do that.
    readonly_fields = ("id", "schedule_name", "rule", "state", "reason", "key", "count",
                       "first_at", "last_at", "resolved_at", "acknowledged_at",
                       "acknowledged_by", "ack_note", "silenced_until", "silenced_by")
    fields = readonly_fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # Open alerts first, then the newest.
        return super().get_queryset(request).order_by(
            RawSQL("CASE WHEN state = 'open' THEN 0 ELSE 1 END", ()), "-id")

    @admin.display(description="reason")
    def reason_shown(self, row: Alert) -> str:
        return shortened(row.reason, 120)


def read_through_api(read: Callable[[Schedules], Sequence[T]]) -> Sequence[T] | str:
    """What ``read`` gets through the API, or why it could not be read (shown in its place)."""
    try:
        with integration.schedules() as api:
            return read(api)
    except GoatbeatError as exc:
        return f"could not be read: {exc}"


def shortened(text: str | None, limit: int = 80) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit - 3] + "..."


__all__ = ["AlertAdmin", "ExecutionAdmin", "ScheduleAdmin"]
