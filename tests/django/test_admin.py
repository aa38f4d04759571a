"""The admin pages, through Django's test client logged in as a superuser, on a fresh
PostgreSQL database: every change they make is checked through the Schedules API."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from goatbeat_celery import ScheduleNotFound
from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.fields import FieldInfo
from goatbeat_celery.core.types.schedule import Schedule as StoredSchedule
from goatbeat_celery.core.types.spec import PLAIN_FIELDS, ScheduleSource
from tests.django.conftest import add_config_schedule, set_aside

from .admin_pages import ADD, CHANGELIST, EXECUTIONS, cells, change_url, form_data, history_of


def test_the_changelist_shows_next_run_last_run_state_and_source(client: Any,
                                                                 api: Schedules) -> None:
    api.create("digest", "mail.digest", cron="0 7 * * mon-fri", timezone="Europe/Paris")
    api.create("poll", "feeds.poll", every=30)
    api.pause("poll")
    api.create("broken", "feeds.broken", every=60)
    set_aside(api, "broken", "task refused by the broker")
    add_config_schedule(api, "heartbeat", "proj.heartbeat")

    page = client.get(CHANGELIST)
    text = page.content.decode()
    assert page.status_code == 200
    for expected in ("digest", "cron 0 7 * * mon-fri in Europe/Paris: At 07:00 AM, Monday "
                     "through Friday", "paused", "enabled",
                     "set aside: task refused by the broker", "config (beat_schedule)",
                     "database", "next run", "last run"):
        assert expected.lower() in text.lower(), expected


def claimed_poll(api: Schedules) -> StoredSchedule:
    """Schedule ``poll`` (every minute, due) with its run claimed as a leader claims it; the
    schedule as it was before the claim."""
    from tests.conformance.support import claim_next, create_due

    due = create_due(api.store, "poll", every=60)
    grant = api.store.acquire("default", "tests", timedelta(seconds=30))  # type: ignore[attr-defined]
    api.store.claim([claim_next(due)], lease=grant)
    return due


def test_the_changelist_shows_the_next_and_last_run_of_each_schedule(client: Any,
                                                                     api: Schedules) -> None:
    from django.contrib.admin.utils import display_for_value

    # A run claimed as the leader claims it: its occurrence is the last run, the one after it
    # the next run.
    due = claimed_poll(api)
    poll = api.get("poll")
    assert poll.last_occurrence_at == due.next_occurrence_at
    api.create("digest", "mail.digest", cron="0 7 * * mon-fri", timezone="Europe/Paris")
    api.create("paused", "feeds.poll", every=30)
    api.pause("paused")

    text = client.get(CHANGELIST).content.decode()
    shown = cells(text, "poll")
    assert shown["next_run"] == display_for_value(poll.next_run_at, "-")
    assert shown["last_run"] == display_for_value(poll.last_occurrence_at, "-")
    assert shown["next_run"] != shown["last_run"]
    digest = api.get("digest")
    assert digest.next_run_at is not None
    assert cells(text, "digest")["next_run"] == display_for_value(digest.next_run_at, "-")
    # Never run: no last run; paused: no next run.
    assert cells(text, "digest")["last_run"] == "-"
    assert cells(text, "paused")["next_run"] == "-"


def test_search_and_filters_narrow_the_list(client: Any, api: Schedules) -> None:
    api.create("digest", "mail.digest", every=3600)
    api.create("poll", "feeds.poll", every=30)
    api.pause("poll")
    add_config_schedule(api, "heartbeat", "proj.heartbeat")

    def names(query: str) -> set[str]:
        page = client.get(CHANGELIST + query)
        assert page.status_code == 200
        return {row.pk for row in page.context["cl"].result_list}

    assert names("?q=dig") == {"digest"}
    assert names("?state=paused") == {"poll"}
    assert names("?state=enabled") == {"digest", "heartbeat"}
    assert names("?source__exact=config") == {"heartbeat"}
    assert names("?source__exact=api") == {"digest", "poll"}


def test_adding_a_schedule_goes_through_the_api(client: Any, api: Schedules) -> None:
    response = client.post(ADD, form_data(queue="feeds", priority="3", kwargs='{"n": 1}'))
    assert response.status_code == 302, response.context["adminform"].form.errors
    stored = api.get("poll")
    assert stored.spec.source is ScheduleSource.API
    assert stored.spec.trigger.params["every"] == 30.0
    assert dict(stored.spec.options) == {"queue": "feeds", "priority": 3}
    assert dict(stored.spec.kwargs) == {"n": 1}
    assert stored.next_run_at is not None


def test_a_cron_schedule_can_ask_for_both_day_fields(client: Any, api: Schedules) -> None:
    response = client.post(ADD, form_data(name="payday", kind="cron", every="",
                                          cron="0 9 1 * fri", timezone="Europe/Paris"))
    assert response.status_code == 302
    params = api.get("payday").spec.trigger.params
    assert params["day_or"] is False
    assert params["timezone"] == "Europe/Paris"


@pytest.mark.parametrize(("values", "field", "words"), [
    ({"every": "0.1"}, "every", "must be >= 1s"),
    ({"kind": "cron", "cron": "61 * * * *"}, "cron", "out of range"),
    ({"kind": "cron", "cron": "0 * * * *", "timezone": "Mars/Olympus"}, "timezone",
     "unknown zone"),
    ({"priority": "300"}, "priority", "from 0 to 255"),
    ({"queue": "x" * 300}, "queue", "at most 255"),
    ({"max_catchup": "0"}, "max_catchup", "from 1 to"),
    ({"misfire_grace": "soon"}, "misfire_grace", "cannot read"),
    ({"name": "bad\nname"}, "name", ""),
], ids=["every", "cron", "timezone", "priority", "queue", "max_catchup", "duration", "name"])
def test_the_apis_problems_are_shown_on_their_fields(client: Any, api: Schedules,
                                                      values: dict[str, str], field: str,
                                                      words: str) -> None:
    response = client.post(ADD, form_data(**values))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors, errors
    assert words in " ".join(errors[field])
    assert not api.list()


def test_a_taken_name_is_an_error_on_the_name(client: Any, api: Schedules) -> None:
    api.create("poll", "feeds.poll", every=30)
    response = client.post(ADD, form_data())
    assert "already exists" in " ".join(response.context["adminform"].form.errors["name"])


def test_editing_shows_the_stored_values_and_updates_through_the_api(client: Any,
                                                                     api: Schedules) -> None:
    api.create("poll", "feeds.poll", every=30, options={"queue": "feeds", "serializer": "json"})
    page = client.get(change_url("poll"))
    form = page.context["adminform"].form
    assert form.initial["every"] == "30"
    assert form.initial["queue"] == "feeds"
    version = form.initial["version"]

    response = client.post(change_url("poll"), form_data(every="60", queue="slow",
                                                         version=str(version)))
    assert response.status_code == 302
    stored = api.get("poll")
    assert stored.spec.trigger.params["every"] == 60.0
    # An option the form has no field for is kept.
    assert dict(stored.spec.options) == {"queue": "slow", "serializer": "json"}


def test_an_edit_made_meanwhile_is_not_overwritten(client: Any, api: Schedules) -> None:
    api.create("poll", "feeds.poll", every=30)
    version = client.get(change_url("poll")).context["adminform"].form.initial["version"]
    api.update("poll", every=45)
    response = client.post(change_url("poll"), form_data(every="60", version=str(version)))
    assert response.status_code == 200
    assert "reload it" in " ".join(response.context["adminform"].form.non_field_errors())
    assert api.get("poll").spec.trigger.params["every"] == 45.0


def test_a_refused_edit_names_what_changed_since_the_page_was_read(client: Any,
                                                                  api: Schedules) -> None:
    api.create("poll", "feeds.poll", cron="*/5 * * * *", options={"queue": "a"})
    form = client.get(change_url("poll")).context["adminform"].form
    api.update("poll", cron="*/10 * * * *", options={"queue": "b"})

    response = client.post(change_url("poll"), form_data(
        kind="cron", cron="*/5 * * * *", every=None, queue="mine",
        version=str(form.initial["version"]), read=form.initial["read"]))

    assert response.status_code == 200
    assert response.context["adminform"].form.non_field_errors() == [
        "schedule 'poll' changed since you read it: cron '*/5 * * * *' \u2192 '*/10 * * * *', "
        "queue 'a' \u2192 'b'; read it again and redo your change"]
    assert api.get("poll").spec.options == {"queue": "b"}


def test_config_schedules_are_read_only(client: Any, api: Schedules) -> None:
    add_config_schedule(api, "heartbeat", "proj.heartbeat")
    page = client.get(change_url("heartbeat"))
    assert page.status_code == 200
    assert page.context["has_change_permission"] is False
    assert client.post(change_url("heartbeat"), form_data(name="heartbeat")).status_code == 403
    response = client.post(CHANGELIST, {"action": "pause_schedules",
                                        "_selected_action": ["heartbeat"]}, follow=True)
    assert "change it in the Celery config" in response.content.decode()
    assert api.get("heartbeat").spec.enabled


def test_pause_resume_and_run_now_actions(client: Any, api: Schedules) -> None:
    api.create("poll", "feeds.poll", every=30)
    api.create("digest", "mail.digest", every=3600)

    def act(action: str, *names: str) -> str:
        response = client.post(CHANGELIST, {"action": action, "_selected_action": list(names)},
                               follow=True)
        assert response.status_code == 200
        return str(response.content.decode())

    assert "2 schedules paused" in act("pause_schedules", "poll", "digest")
    assert not api.get("poll").spec.enabled and not api.get("digest").spec.enabled
    assert "1 schedule resumed" in act("resume_schedules", "poll")
    assert api.get("poll").spec.enabled and not api.get("digest").spec.enabled
    assert "queued to run now" in act("run_now", "digest")
    [execution] = api.history("digest")
    assert execution.manual


def delete_url(name: str) -> str:
    from django.contrib.admin.utils import quote

    return f"/admin/goatbeat/schedule/{quote(name)}/delete/"


def deletions_logged(name: str) -> int:
    from django.contrib.admin.models import DELETION, LogEntry

    return LogEntry.objects.filter(object_id=name, action_flag=DELETION).count()


def test_the_delete_action_asks_first_then_deletes_through_the_api(client: Any,
                                                                   api: Schedules) -> None:
    api.create("poll", "feeds.poll", every=30)
    api.create("digest", "mail.digest", every=3600)
    add_config_schedule(api, "heartbeat", "proj.heartbeat")
    selected = {"action": "delete_selected", "_selected_action": ["poll", "heartbeat"]}
    logged = deletions_logged("poll")  # the module's earlier tests may have deleted a poll

    page = client.post(CHANGELIST, selected)
    assert page.status_code == 200
    assert "admin/delete_selected_confirmation.html" in [t.name for t in page.templates]
    text = page.content.decode()
    assert "Are you sure you want to delete the selected schedule?" in text
    assert f'<a href="{change_url("poll")}">poll</a>' in text
    assert "&#x27;heartbeat&#x27; will not be deleted" in text
    # Only the schedule it may delete is carried to the confirmation.
    assert page.context["queryset"] == [api_row("poll")]
    assert 'name="csrfmiddlewaretoken"' in text
    # Asking deletes nothing: leaving the page ("No, take me back") keeps every schedule.
    assert {s.spec.name for s in api.list()} == {"poll", "digest", "heartbeat"}
    assert deletions_logged("poll") == logged

    response = client.post(CHANGELIST, {"action": "delete_selected", "post": "yes",
                                        "_selected_action": ["poll"]}, follow=True)
    assert "1 schedule deleted: &#x27;poll&#x27;" in response.content.decode()
    with pytest.raises(ScheduleNotFound):
        api.get("poll")
    assert api.get("digest").spec.name == "digest"
    assert deletions_logged("poll") == logged + 1


def api_row(name: str) -> Any:
    from goatbeat_celery.contrib.django.models import Schedule

    return Schedule.objects.get(name=name)


def test_a_delete_action_of_config_schedules_alone_asks_nothing(client: Any,
                                                                api: Schedules) -> None:
    add_config_schedule(api, "heartbeat", "proj.heartbeat")
    response = client.post(CHANGELIST, {"action": "delete_selected",
                                        "_selected_action": ["heartbeat"]}, follow=True)
    assert [t.name for t in response.templates][0] == "admin/change_list.html"
    assert "change it in the Celery config" in response.content.decode()
    assert api.get("heartbeat").spec.name == "heartbeat"


def test_the_delete_page_deletes_through_the_api_and_logs_it(client: Any,
                                                             api: Schedules) -> None:
    api.create("poll", "feeds.poll", every=30)
    logged = deletions_logged("poll")
    page = client.get(delete_url("poll"))
    assert page.status_code == 200
    response = client.post(delete_url("poll"), {"post": "yes"}, follow=True)
    assert response.status_code == 200
    assert "was deleted successfully" in response.content.decode()
    with pytest.raises(ScheduleNotFound):
        api.get("poll")
    assert deletions_logged("poll") == logged + 1


def test_a_schedule_deleted_behind_the_delete_page_is_a_message(client: Any,
                                                                api: Schedules) -> None:
    api.create("poll", "feeds.poll", every=30)
    assert client.get(delete_url("poll")).status_code == 200
    api.delete("poll")
    response = client.post(delete_url("poll"), {"post": "yes"}, follow=True)
    assert response.status_code == 200
    assert "Perhaps it was deleted?" in response.content.decode()


def test_delete_model_reports_a_schedule_gone_since_the_page_read_it(superuser: Any,
                                                                     api: Schedules) -> None:
    """Between the delete page's read of the row and its deletion through the API, someone
    else deletes it: a warning, no success claimed, back to the list."""
    from django.contrib import admin as django_admin
    from django.contrib.messages import get_messages
    from django.contrib.messages.storage.fallback import FallbackStorage
    from django.contrib.sessions.backends.db import SessionStore
    from django.test import RequestFactory

    from goatbeat_celery.contrib.django.models import Schedule

    api.create("poll", "feeds.poll", every=30)
    row = api_row("poll")
    api.delete("poll")
    request = RequestFactory().post(delete_url("poll"), {"post": "yes"})
    request.user, request.session = superuser, SessionStore()
    request._messages = FallbackStorage(request)
    model_admin = django_admin.site.get_model_admin(Schedule)

    model_admin.delete_model(request, row)
    response = model_admin.response_delete(request, "poll", "poll")
    assert response.status_code == 302
    assert response["Location"] == CHANGELIST
    assert [str(m) for m in get_messages(request)] == ["'poll' was already deleted."]


def test_an_action_posted_without_a_csrf_token_is_refused(superuser: Any,
                                                           api: Schedules) -> None:
    from django.test import Client

    api.create("poll", "feeds.poll", every=30)
    client = Client(enforce_csrf_checks=True)
    client.force_login(superuser)
    for action in ("delete_selected", "pause_schedules"):
        response = client.post(CHANGELIST, {"action": action, "post": "yes",
                                            "_selected_action": ["poll"]})
        assert response.status_code == 403, action
    stored = api.get("poll")
    assert stored.spec.enabled


def test_executions_are_listed_read_only_with_filters(client: Any, api: Schedules) -> None:
    api.create("poll", "feeds.poll", every=30)
    api.create("digest", "mail.digest", every=3600)
    first = api.run_now("poll")
    second = api.run_now("digest")
    api.store.mark_submitted([first.key])

    def keys(query: str) -> set[str]:
        page = client.get(EXECUTIONS + query)
        assert page.status_code == 200
        return {row.pk for row in page.context["cl"].result_list}

    assert len(keys("")) == 2
    assert keys("?schedule=poll") == {first.key}
    assert keys("?state__exact=submitted") == {first.key}
    assert keys("?state__exact=claimed&schedule=poll") == set()

    # What a worker reported of the run (run tracking), shown and filtered on.
    api.store.record_runs([
        RunEvent.started(first.key, run="attempt-1", worker="celery@w1",
                         age=timedelta(seconds=2)),
        RunEvent.finished(first.key, run="attempt-1", worker="celery@w1", age=timedelta(0),
                          outcome=RunOutcome.FAILED, runtime=timedelta(seconds=1.5),
                          error="ValueError: <b>boom</b>")])
    assert keys("?run_state__exact=failed") == {first.key}
    assert keys("?run_state__isnull=True") == {second.key}
    text = client.get(EXECUTIONS).content.decode()
    assert "failed: ValueError: &lt;b&gt;boom&lt;/b&gt;" in text
    assert "celery@w1" in text and "1.500s" in text
    page = client.get(f"/admin/goatbeat/execution/{first.key}/change/".replace(":", "_3A"))
    assert page.status_code == 200
    assert page.context["has_change_permission"] is False
    assert client.get(EXECUTIONS + "add/").status_code == 403


# -- run policies and controls ---------------------------------------------------------------
POLICIES = {"mode": "fixed_delay", "overlap": "skip", "failure_backoff": "30s",
            "failure_backoff_factor": "3", "failure_backoff_max": "10m",
            "pause_after_failures": "5"}
CONTROLS = {"start_at": "2030-01-01 08:00:00", "end_at": "2030-06-30 18:00:00",
            "max_runs": "10", "description": "Polls <the> feeds & more",
            "tags": "feeds, nightly", "calendars": "holidays"}


def test_run_policies_and_controls_are_created_through_the_api(client: Any,
                                                                api: Schedules) -> None:
    api.create_calendar("holidays", dates=["2030-05-01"])
    response = client.post(ADD, form_data(**POLICIES, **CONTROLS))
    assert response.status_code == 302, response.context["adminform"].form.errors
    spec = api.get("poll").spec
    assert spec.mode.value == "fixed_delay"
    assert spec.overlap is not None and spec.overlap.value == "skip"
    assert spec.failure_backoff == timedelta(seconds=30)
    assert spec.failure_backoff_factor == 3.0
    assert spec.failure_backoff_max == timedelta(minutes=10)
    assert spec.pause_after_failures == 5
    assert spec.start_at == datetime(2030, 1, 1, 8, tzinfo=timezone.utc)
    assert spec.end_at == datetime(2030, 6, 30, 18, tzinfo=timezone.utc)
    assert spec.max_runs == 10
    assert spec.description == "Polls <the> feeds & more"
    assert spec.tags == ("feeds", "nightly")
    assert spec.calendars == ("holidays",)
    # Its first run is within the bounds.
    assert api.get("poll").next_run_at == datetime(2030, 1, 1, 8, tzinfo=timezone.utc)


def test_the_change_form_shows_policies_and_controls_and_an_edit_clears_them(
        client: Any, api: Schedules) -> None:
    api.create_calendar("holidays", dates=["2030-05-01"])
    api.create("poll", "feeds.poll", every=30, mode="fixed_delay", overlap="buffer_one",
               failure_backoff=30, failure_backoff_factor=1.5, failure_backoff_max=600,
               pause_after_failures=4, max_runs=3, description="a <b>note</b>",
               tags=["feeds", "nightly"], calendars=["holidays"],
               end_at=datetime(2030, 6, 30, 18, tzinfo=timezone.utc))
    page = client.get(change_url("poll"))
    form = page.context["adminform"].form
    for key, expected in {"mode": "fixed_delay", "overlap": "buffer_one",
                          "failure_backoff": "30", "failure_backoff_factor": 1.5,
                          "failure_backoff_max": "600", "pause_after_failures": 4,
                          "max_runs": 3, "description": "a <b>note</b>",
                          "tags": "feeds, nightly", "calendars": "holidays"}.items():
        assert form.initial[key] == expected, key
    text = page.content.decode()
    assert "Run policies" in text and "Controls" in text
    assert "a &lt;b&gt;note&lt;/b&gt;" in text

    # Saving the form as shown changes nothing.
    initial = {key: value for key, value in form.initial.items() if value is not None}
    shown = form_data(**{key: ("on" if value is True else value)
                         for key, value in initial.items() if value is not False})
    shown["end_at"] = "2030-06-30 18:00:00"
    before = api.get("poll")
    assert client.post(change_url("poll"), shown).status_code == 302
    assert api.get("poll").row_version == before.row_version

    # Emptied fields go back to the defaults.
    response = client.post(change_url("poll"), form_data(version=str(before.version)))
    assert response.status_code == 302, response.context["adminform"].form.errors
    spec = api.get("poll").spec
    assert spec.mode.value == "fixed_rate" and spec.overlap is None
    assert spec.failure_backoff is None and spec.pause_after_failures is None
    assert spec.max_runs is None and spec.end_at is None and spec.description is None
    assert spec.tags == () and spec.calendars == ()


@pytest.mark.parametrize(("values", "field", "words"), [
    ({"kind": "cron", "cron": "0 * * * *", "mode": "fixed_delay"}, "mode", "interval"),
    ({"failure_backoff_factor": "0.5"}, "failure_backoff_factor", "from 1 to"),
    ({"failure_backoff_max": "1m"}, "failure_backoff", "give it too"),
    ({"failure_backoff": "5m", "failure_backoff_max": "1m"}, "failure_backoff_max",
     "not be shorter"),
    ({"failure_backoff": "later"}, "failure_backoff", "cannot read"),
    ({"pause_after_failures": "0"}, "pause_after_failures", "from 1 to"),
    ({"start_at": "2030-02-01 00:00:00", "end_at": "2030-01-01 00:00:00"}, "end_at",
     "before start_at"),
    ({"max_runs": "0"}, "max_runs", "from 1 to"),
    ({"tags": "ok, not ok"}, "tags", "whitespace"),
    ({"calendars": "nowhere"}, "calendars", "no calendar named 'nowhere'"),
    ({"description": "bell\x07"}, "description", "control"),
], ids=["mode", "factor", "cap-alone", "cap-short", "backoff-text", "pause-after",
        "window", "max_runs", "tags", "calendars", "description"])
def test_policy_and_control_problems_are_shown_on_their_fields(
        client: Any, api: Schedules, values: dict[str, str], field: str, words: str) -> None:
    response = client.post(ADD, form_data(**values))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors, errors
    assert words in " ".join(errors[field]), errors
    assert not api.list()


def test_a_number_beyond_any_duration_is_shown_on_its_field(client: Any,
                                                             api: Schedules) -> None:
    for field in ("every", "misfire_grace", "expires", "failure_backoff_factor",
                  "max_runs"):
        response = client.post(ADD, form_data(**{field: "9" * 300, "failure_backoff": "60"}))
        assert response.status_code == 200
        errors = response.context["adminform"].form.errors
        assert field in errors, (field, errors)
    assert not api.list()


def set_columns(url: str, name: str, **values: Any) -> None:
    """Write what the leader records of runs (failures in a row, a pause of its own) straight
    into the row: test data for the pages that show it."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, poolclass=sa.NullPool)
    assignments = ", ".join(f"{key} = :{key}" for key in values)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(f"UPDATE goatbeat_schedule SET {assignments} "
                                       "WHERE name = :name"), {**values, "name": name})
    finally:
        engine.dispose()


def test_the_change_page_and_list_show_pauses_and_failures(client: Any, api: Schedules,
                                                           django_db: str) -> None:
    api.create("poll", "feeds.poll", every=30)
    api.create("digest", "mail.digest", every=3600, pause_after_failures=3)
    api.create("steady", "mail.steady", every=3600, tags=["mail"])
    until = datetime.now(timezone.utc) + timedelta(days=2)
    api.pause("poll", until=until, note="feed <down>")
    api.pause("digest")
    set_columns(django_db, "digest", consecutive_failures=3,
                paused_reason="paused after 3 failed runs in a row")

    text = client.get(CHANGELIST).content.decode()
    assert "paused until " + until.isoformat(timespec="seconds") in text
    assert "feed &lt;down&gt;" in text
    assert "paused: paused after 3 failed runs in a row (3 failures in a row)" in text

    page = client.get(change_url("digest"))
    body = page.content.decode()
    assert "Status" in body and "failures in a row" in body.lower()
    assert "0 run, 0 missed, 0 skipped" in body
    paused = client.get(change_url("poll")).content.decode()
    assert ("paused until " + until.isoformat(timespec="seconds") + ": feed &lt;down&gt;"
            in paused)

    def names(query: str) -> set[str]:
        return {row.pk for row in client.get(CHANGELIST + query).context["cl"].result_list}

    # A pause with an end leaves the schedule enabled, but it is paused all the same.
    assert names("?state=paused") == {"poll", "digest"}
    assert names("?state=enabled") == {"steady"}
    assert names("?state=failing") == {"digest"}
    assert names("?tag=mail") == {"steady"}
    assert names("?q=steady") == {"steady"}


def test_tags_are_listed_and_filtered_on(client: Any, api: Schedules) -> None:
    api.create("poll", "feeds.poll", every=30, tags=["feeds", "nightly"],
               description="the partner feeds")
    api.create("digest", "mail.digest", every=3600, tags=["mail", "nightly"])
    api.create("plain", "mail.plain", every=3600)
    page = client.get(CHANGELIST)
    assert "feeds, nightly" in page.content.decode()
    [tag_filter] = [spec for spec in page.context["cl"].filter_specs
                    if getattr(spec, "parameter_name", "") == "tag"]
    assert [value for value, _ in tag_filter.lookup_choices] == ["feeds", "mail", "nightly"]

    def names(query: str) -> set[str]:
        return {row.pk for row in client.get(CHANGELIST + query).context["cl"].result_list}

    assert names("?tag=nightly") == {"poll", "digest"}
    assert names("?tag=nightly&q=digest") == {"digest"}
    assert names("?q=partner") == {"poll"}


def test_the_tag_filter_follows_edits_and_deletions(client: Any, api: Schedules) -> None:
    api.create("poll", "feeds.poll", every=30, tags=["feeds", "nightly"])
    api.create("digest", "mail.digest", every=3600, tags=["mail"])

    def names(query: str) -> set[str]:
        return {row.pk for row in client.get(CHANGELIST + query).context["cl"].result_list}

    def choices() -> list[str]:
        page = client.get(CHANGELIST)
        [tag_filter] = [spec for spec in page.context["cl"].filter_specs
                        if getattr(spec, "parameter_name", "") == "tag"]
        return [value for value, _ in tag_filter.lookup_choices]

    api.update("poll", tags=["mail"])
    assert (names("?tag=mail"), names("?tag=nightly")) == ({"poll", "digest"}, set())
    assert choices() == ["mail"]
    api.delete("digest")
    assert names("?tag=mail") == {"poll"}
    # A value is a tag to look up, whatever its characters, never SQL.
    assert names("?tag=" + "mail' OR 'a'='a") == set()
    assert names("?tag=%25") == set()


def test_the_tag_choices_are_bounded_and_in_order(client: Any, api: Schedules) -> None:
    from goatbeat_celery.contrib.django.admin import MAX_TAG_CHOICES

    for index in range(MAX_TAG_CHOICES // 10 + 1):
        api.create(f"job-{index:03d}", "proj.tick", every=60,
                   tags=[f"t{index * 10 + k:04d}" for k in range(10)])
    page = client.get(CHANGELIST)
    [tag_filter] = [spec for spec in page.context["cl"].filter_specs
                    if getattr(spec, "parameter_name", "") == "tag"]
    assert [value for value, _ in tag_filter.lookup_choices] == [
        f"t{n:04d}" for n in range(MAX_TAG_CHOICES)]
    last = f"t{MAX_TAG_CHOICES + 9:04d}"  # offered or not, a tag filters all the same
    assert {row.pk for row in client.get(CHANGELIST + "?tag=" + last)
            .context["cl"].result_list} == {f"job-{MAX_TAG_CHOICES // 10:03d}"}


def test_executions_the_overlap_policy_skipped_or_held_are_filtered_on(
        client: Any, api: Schedules, django_db: str) -> None:
    import sqlalchemy as sa

    api.create("poll", "feeds.poll", every=30, overlap="skip")
    skipped = api.run_now("poll")
    held = api.run_now("poll")
    engine = sa.create_engine(django_db, poolclass=sa.NullPool)
    try:
        # What the leader records when the run before had not finished (test data).
        with engine.begin() as connection:
            for key, state in ((skipped.key, "skipped"), (held.key, "held")):
                connection.execute(sa.text("UPDATE goatbeat_execution SET state = :state, "
                                           "last_error = :error WHERE key = :key"),
                                   {"state": state, "key": key,
                                    "error": "the run before had not finished"})
    finally:
        engine.dispose()
    page = client.get(EXECUTIONS)
    [state_filter] = [spec for spec in page.context["cl"].filter_specs
                      if getattr(spec, "field_path", "") == "state"]
    assert {"held", "skipped"} <= {value for value, _ in state_filter.field.flatchoices}
    found = client.get(EXECUTIONS + "?state__exact=skipped").context["cl"].result_list
    assert [row.pk for row in found] == [skipped.key]
    assert "the run before had not finished" in page.content.decode()


#: A value of each kind of plain field, as typed in the form and as the spec holds it (a
#: duration shorter than the 30 s interval, as an offset must be).
PLAIN_TYPED = {"duration": ("17s", timedelta(seconds=17)), "count": ("7", 7),
               "factor": ("1.5", 1.5)}


@pytest.mark.parametrize("field", PLAIN_FIELDS, ids=lambda field: field.name)
def test_each_plain_field_is_placed_created_shown_and_cleared(client: Any, api: Schedules,
                                                            field: FieldInfo) -> None:
    from goatbeat_celery.contrib.django.admin import ScheduleAdmin

    placed = [name for _title, options in ScheduleAdmin.fieldsets for name in options["fields"]]
    assert placed.count(field.name) == 1
    typed, stored = PLAIN_TYPED[field.kind]
    # A backoff's shape needs the backoff.
    needs = {"failure_backoff": "10s"} if field.name.startswith("failure_backoff_") else {}
    response = client.post(ADD, form_data(**needs, **{field.name: typed}))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert getattr(api.get("poll").spec, field.name) == stored
    page = client.get(change_url("poll"))
    form = page.context["adminform"].form
    assert str(form.initial[field.name]) == (
        str(int(stored.total_seconds())) if isinstance(stored, timedelta) else str(stored))
    assert field.label in page.content.decode()
    # Emptied, it is unset.
    response = client.post(change_url("poll"), form_data(
        **needs, version=str(api.get("poll").version)))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert getattr(api.get("poll").spec, field.name) is None


# -- what the pages say, as the other faces say it -----------------------------------------
def test_each_trigger_is_shown_once_in_words(client: Any, api: Schedules) -> None:
    """One rendering per trigger, the one `goatbeat list` uses: an interval in units, a cron
    with its zone, Celery's day matching said once, and what it means in words; a solar entry
    of beat_schedule as its event and place, not as the raw stored trigger."""
    from goatbeat_celery.core.types.spec import ScheduleSpec, SyncEntry, TriggerSpec

    api.create("ten", "feeds.poll", every=600)
    api.create("payday", "pay.run", cron="0 9 1-7 * fri", timezone="Europe/Paris",
               day_or=False)
    grant = api.store.acquire("default", "tests", timedelta(seconds=30))  # type: ignore[attr-defined]
    dawn = ScheduleSpec(name="dawn", task="garden.lights_off", source=ScheduleSource.CONFIG,
                        trigger=TriggerSpec(kind="celery", params={
                            "entry": "dawn",
                            "repr": "<solar: sunrise at latitude 48.85, longitude: -2.35>"}))
    now = api.store.now()
    api.store.sync_config([SyncEntry(spec=dawn, next_occurrence_at=now, next_run_at=now)],
                          lease=grant)

    text = client.get(CHANGELIST).content.decode()
    assert cells(text, "ten")["runs"] == "every 10m"
    payday = cells(text, "payday")["runs"]
    assert payday == ("cron 0 9 1-7 * fri in Europe/Paris (day of month and day of week): At "
                      "09:00 AM, between day 1 and 7 of the month, only on Friday"), payday
    assert cells(text, "dawn")["runs"] == "solar sunrise at 48.85°N 2.35°W"
    assert "not readable" not in text


def test_the_add_form_starts_with_celerys_day_matching_and_empty_headers(
        client: Any, api: Schedules) -> None:
    page = client.get(ADD)
    form = page.context["adminform"].form
    assert form["day_or"].value() is False
    text = page.content.decode()
    assert 'name="day_or"' in text and 'name="day_or" checked' not in text
    assert form["headers"].value() == "{}" or form["headers"].value() == {}
    assert ">null</textarea>" not in text
    # Saved as it comes: a cron restricting both days matches both, as Celery's crontab.
    response = client.post(ADD, form_data(name="payday", kind="cron", every="",
                                          cron="0 9 1-7 * fri", timezone="UTC",
                                          headers="{}"))
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert api.get("payday").spec.trigger.params["day_or"] is False
    assert "headers" not in api.get("payday").spec.options
    # An edit shows the stored headers, never null.
    assert ">null</textarea>" not in client.get(change_url("payday")).content.decode()


@pytest.mark.parametrize("headers", [
    {"task": "probe.secret_admin"}, {"id": "<another schedule's run key>"},
    {"ETA": "2030-01-01T00:00:00+00:00"}, {"shadow": "feeds.poll", "goatbeat_schedule": "x"},
], ids=["task", "id", "eta", "shadow-and-goatbeat"])
def test_headers_only_celery_and_goatbeat_set_are_refused_on_the_headers_field(
        client: Any, api: Schedules, headers: dict[str, str]) -> None:
    import json

    api.create("other", "feeds.other", every=60)
    key = api.run_now("other").key
    given = {name: key if value.startswith("<") else value for name, value in headers.items()}

    added = client.post(ADD, form_data(headers=json.dumps({**given, "team": "ops"})))
    api.create("poll", "feeds.poll", every=30, options={"headers": {"team": "ops"}})
    version = client.get(change_url("poll")).context["adminform"].form.initial["version"]
    edited = client.post(change_url("poll"), form_data(headers=json.dumps(given),
                                                       version=str(version)))

    for response in (added, edited):
        assert response.status_code == 200
        errors = response.context["adminform"].form.errors
        assert list(errors) == ["headers"], errors
        assert [e.split(" is refused")[0] for e in errors["headers"]] == [
            repr(name) for name in given]
    assert api.get("poll").spec.options == {"headers": {"team": "ops"}}
    assert [s.name for s in api.list()] == ["other", "poll"]


def test_run_now_is_shown_on_the_runs_someone_asked_for_only(client: Any,
                                                             api: Schedules) -> None:
    claimed_poll(api)
    manual = api.run_now("poll")
    page = client.get(EXECUTIONS)
    rows = {row.pk: row for row in page.context["cl"].result_list}
    assert len(rows) == 2
    text = page.content.decode()
    scheduled = next(key for key in rows if key != manual.key)
    assert cells_of_execution(text, manual.key)["origin"] == "run now"
    assert cells_of_execution(text, scheduled)["origin"] == "-"  # the admin's "nothing"
    assert "icon-no.svg" not in text  # no red cross on the schedule's own runs


def cells_of_execution(text: str, key: str) -> dict[str, str]:
    import html
    import re

    [row] = [row for row in text.split("<tr")[1:] if f">{html.escape(key)}</a></th>" in row]
    found = re.findall(r'<t[dh] class="field-(\w+)[^"]*"[^>]*>(.*?)</t[dh]>', row, re.S)
    return {field: html.unescape(re.sub(r"<[^>]+>", "", value)).strip()
            for field, value in found}


def test_a_task_the_project_does_not_know_is_saved_with_the_clis_warning(
        client: Any, api: Schedules) -> None:
    from tests.django.testproj.celery import app

    def poll() -> None:
        pass

    app.task(name="feeds.poll", shared=False)(poll)
    try:
        response = client.post(ADD, form_data(name="typo", task="feeds.pol"), follow=True)
        shown = [str(message) for message in response.context["messages"]]
        assert api.get("typo").spec.task == "feeds.pol"  # a warning, never a refusal
        assert ("task 'feeds.pol' is not registered in the project's Celery app (did you "
                "mean 'feeds.poll'?): stored anyway, as beat sends tasks by name, but a "
                "worker that does not know it rejects every run") in shown, shown
        response = client.post(ADD, form_data(name="known"), follow=True)
        shown = [str(message) for message in response.context["messages"]]
        assert not any("not registered" in message for message in shown), shown
    finally:
        app.tasks.pop("feeds.poll", None)


def test_the_change_page_lists_the_last_runs_with_their_outcome_and_error(
        client: Any, api: Schedules) -> None:
    from goatbeat_celery.contrib.django.admin import HISTORY_LENGTH

    api.create("poll", "feeds.poll", every=30)
    assert "none yet" in client.get(change_url("poll")).content.decode()

    failed = api.run_now("poll")
    api.store.mark_submitted([failed.key])
    api.store.record_runs([
        RunEvent.started(failed.key, run="attempt-1", worker="celery@w1",
                         age=timedelta(seconds=2)),
        RunEvent.finished(failed.key, run="attempt-1", worker="celery@w1", age=timedelta(0),
                          outcome=RunOutcome.FAILED, runtime=timedelta(seconds=1.5),
                          error="ValueError: <b>boom</b>")])
    sent = api.run_now("poll")
    api.store.mark_submitted([sent.key])
    text = client.get(change_url("poll")).content.decode()
    runs = history_of(text)
    assert [run[2:] for run in runs] == [["run now", "submitted", ""],
                                         ["run now", "failed", "ValueError: <b>boom</b>"]]
    assert "ValueError: &lt;b&gt;boom&lt;/b&gt;" in text  # escaped
    table = text.split('class="goatbeat-history"', 1)[1].split("</table>", 1)[0]
    assert "<input" not in table and "<textarea" not in table  # read-only
    assert f'{EXECUTIONS}?schedule=poll">all its runs' in text

    # The last ones only; the executions' list has the rest.
    for _ in range(HISTORY_LENGTH):
        api.run_now("poll")
    assert len(history_of(client.get(change_url("poll")).content.decode())) == HISTORY_LENGTH

    # The read-only page of a config schedule lists its runs too, and an edit of a schedule
    # with a history saves as before.
    add_config_schedule(api, "heart & beat", "proj.heartbeat")
    api.run_now("heart & beat")
    text = client.get(change_url("heart & beat")).content.decode()
    assert len(history_of(text)) == 1
    assert f'{EXECUTIONS}?schedule=heart+%26+beat">all its runs' in text
    version = client.get(change_url("poll")).context["adminform"].form.initial["version"]
    response = client.post(change_url("poll"), form_data(every="60", version=str(version)))
    assert response.status_code == 302, response.context["adminform"].form.errors


def test_alerts_are_listed_open_first_read_only_with_filters(client: Any,
                                                              api: Schedules) -> None:
    from goatbeat_celery.core.rules.alerts import AlertChange, AlertRule

    store: Any = api.store
    grant = store.acquire("default", "replica-a", timedelta(seconds=60))
    for name, rule in (("poll", AlertRule.LOST), ("digest", AlertRule.FAILED)):
        store.record_alerts([AlertChange(schedule_name=name, rule=rule, action="open",
                                         reason=f"{rule.value} <b>", key=f"{name}:1")],
                            lease=grant)
    store.record_alerts([AlertChange(schedule_name="poll", rule=AlertRule.LOST,
                                     action="resolve", reason="")], lease=grant)

    def rows(query: str) -> list[tuple[str, str]]:
        page = client.get("/admin/goatbeat/alert/" + query)
        assert page.status_code == 200
        return [(row.schedule_name, row.state) for row in page.context["cl"].result_list]

    assert rows("") == [("digest", "open"), ("poll", "resolved")]
    assert rows("?state__exact=open") == [("digest", "open")]
    assert rows("?rule__exact=lost") == [("poll", "resolved")]
    page = client.get("/admin/goatbeat/alert/")
    assert "failed &lt;b&gt;" in page.content.decode()
    assert client.get("/admin/goatbeat/alert/add/").status_code == 403


def test_every_change_made_in_the_admin_is_in_the_audit_log_as_its_user(
        client: Any, api: Schedules, superuser: Any) -> None:
    actor = f"django:{superuser.get_username()}"
    assert client.post(ADD, form_data(reason="feeds moved here")).status_code == 302
    version = api.get("poll").version
    assert client.post(change_url("poll"), form_data(every="60", version=str(version),
                                                     reason="slower <b>vendor</b>")
                       ).status_code == 302
    client.post(CHANGELIST, {"action": "pause_schedules", "_selected_action": ["poll"]})

    paused, edited, created = api.audit("poll")
    assert [(e.action.value, e.actor, e.reason) for e in (created, edited, paused)] == [
        ("create", actor, "feeds moved here"), ("edit", actor, "slower <b>vendor</b>"),
        ("pause", actor, None)]
    assert edited.changes["trigger"] == ({"kind": "interval", "every": 30.0},
                                         {"kind": "interval", "every": 60.0})

    page = client.get(change_url("poll")).content.decode()
    assert "Last changes" in page and actor in page
    assert "trigger: " in page and "slower &lt;b&gt;vendor&lt;/b&gt;" in page


def test_a_refused_edit_posted_again_as_shown_is_refused_again(client: Any,
                                                               api: Schedules) -> None:
    # Two people on one change page: the first saves a new overlap and max catch-up, the
    # second, who changed only the description, is refused; posting the refused page again
    # (as the admin shows it) is refused too, never reverting the first person's fields.
    api.create("poll", "feeds.poll", every=30, description="feeds")
    form = client.get(change_url("poll")).context["adminform"].form
    read = {"version": str(form.initial["version"]), "read": form.initial["read"]}
    api.update("poll", overlap="skip", max_catchup=7)

    refused = client.post(change_url("poll"), form_data(description="all feeds", **read))
    assert refused.status_code == 200
    shown = refused.context["adminform"].form
    assert "changed since you read it" in " ".join(shown.non_field_errors())
    again = {key: shown[key].value() for key in ("version", "read")}
    assert again == read  # the refused page still says what its person read

    refused_again = client.post(change_url("poll"), form_data(description="all feeds",
                                                              **again))
    assert refused_again.status_code == 200
    assert refused_again.context["adminform"].form.non_field_errors()
    spec = api.get("poll").spec
    assert spec.overlap is not None and spec.overlap.value == "skip"
    assert spec.max_catchup == 7 and spec.description == "feeds"
