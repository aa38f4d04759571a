"""The admin pages, through Django's test client logged in as a superuser, on a fresh
PostgreSQL database: every change they make is checked through the Schedules API."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from goatbeat_celery import ScheduleNotFound
from goatbeat_celery.api import Schedules
from goatbeat_celery.core.model import ScheduleSource
from goatbeat_celery.core.runs import RunEvent, RunOutcome
from tests.django.conftest import add_config_schedule, set_aside

CHANGELIST = "/admin/goatbeat/schedule/"
ADD = "/admin/goatbeat/schedule/add/"
EXECUTIONS = "/admin/goatbeat/execution/"


def change_url(name: str) -> str:
    from django.contrib.admin.utils import quote

    return f"/admin/goatbeat/schedule/{quote(name)}/change/"


def form_data(**values: Any) -> dict[str, Any]:
    data = {"name": "poll", "task": "feeds.poll", "kind": "every", "every": "30",
            "args": "[]", "kwargs": "{}", "headers": "", "enabled": "on"}
    data.update(values)
    return {key: value for key, value in data.items() if value is not None}


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
    for expected in ("digest", "cron 0 7 * * mon-fri Europe/Paris", "paused", "enabled",
                     "set aside: task refused by the broker", "config (beat_schedule)",
                     "database", "next run", "last run"):
        assert expected.lower() in text.lower(), expected


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


def test_deleting_goes_through_the_api(client: Any, api: Schedules) -> None:
    api.create("poll", "feeds.poll", every=30)
    response = client.post(CHANGELIST, {"action": "delete_schedules",
                                        "_selected_action": ["poll"]}, follow=True)
    assert "1 schedule deleted" in response.content.decode()
    with pytest.raises(ScheduleNotFound):
        api.get("poll")


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
