"""Pause, resume, run now, edit, create and remove through the forms; invalid input changes
nothing and is shown next to its field."""

from __future__ import annotations

import html as html_module
import json
import re

import sqlalchemy as sa

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.spec import ScheduleSource
from tests.cli.conftest import config_schedule, insert_row
from tests.web.conftest import Browser

from .pages import error_of


def test_pause_and_resume_go_through_the_api(client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)

    paused = client.submit("/schedule/pause", name="tick")
    assert paused.status_code == 303
    assert not schedules.get("tick").spec.enabled
    page = client.get(paused.headers["location"]).text
    assert "Paused." in page and 'id="resume"' in page

    assert client.submit("/schedule/resume", name="tick").status_code == 303
    assert schedules.get("tick").spec.enabled


def test_run_now_queues_a_run_seen_in_history(client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)

    response = client.submit("/schedule/run", name="tick")

    assert response.status_code == 303
    [execution] = schedules.history("tick")
    assert execution.manual
    assert execution.key in client.get(response.headers["location"]).text


def test_editing_the_trigger_and_queue(client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)

    response = client.submit("/schedule/edit", name="tick", kind="cron", cron="*/5 * * * *",
                             timezone="America/New_York", queue="slow")

    assert response.status_code == 303, response.text
    spec = schedules.get("tick").spec
    assert spec.trigger.kind == "cron"
    assert spec.trigger.params["expression"] == "*/5 * * * *"
    assert spec.trigger.params["timezone"] == "America/New_York"
    assert spec.options == {"queue": "slow"}


def test_an_edit_of_a_page_that_went_stale_is_refused_and_keeps_the_other_edit(
        client: Browser, schedules: Schedules) -> None:
    shown = schedules.create("tick", "proj.tasks.tick", every=60)
    page = client.get("/schedule?name=tick").text
    assert f'name="version" value="{shown.version}"' in page
    schedules.update("tick", options={"queue": "theirs"})  # another operator, meanwhile

    refused = client.submit("/schedule/edit", name="tick", version=str(shown.version),
                            kind="every", every="60", queue="mine")

    assert refused.status_code == 422
    assert "was edited since it was read" in refused.text
    assert schedules.get("tick").spec.options == {"queue": "theirs"}
    # Save again: allowed.
    assert f'name="version" value="{shown.version + 1}"' in refused.text


def test_a_refused_edit_names_what_changed_since_the_page_was_read(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", cron="*/5 * * * *", options={"queue": "a"})
    page = client.get("/schedule?name=tick").text
    # Another operator, meanwhile.
    schedules.update("tick", cron="*/10 * * * *", options={"queue": "b"})

    refused = client.submit("/schedule/edit", name="tick", version=form_version(page),
                            read=html_module.unescape(form_read(page)), kind="cron",
                            cron="*/5 * * * *", queue="mine")

    assert refused.status_code == 422
    assert ("schedule 'tick' changed since you read it: cron '*/5 * * * *' \u2192 "
            "'*/10 * * * *', queue 'a' \u2192 'b'; read it again and redo your change"
            ) in html_module.unescape(refused.text)
    assert schedules.get("tick").spec.options == {"queue": "b"}
    # The page shown again holds the definition as it is now: saving it again is allowed.
    assert json.loads(html_module.unescape(form_read(refused.text)))["cron"] == "*/10 * * * *"


def test_a_page_open_while_the_schedule_runs_saves(client: Browser, schedules: Schedules,
                                                   tables: sa.Engine) -> None:
    shown = schedules.create("tick", "proj.tasks.tick", every=1)
    page = client.get("/schedule?name=tick").text
    # What the leader writes at each run: the row's version and counters, never the definition.
    with tables.begin() as conn:
        conn.execute(sa.text("UPDATE goatbeat_schedule SET version = version + 5, "
                             "total_runs = total_runs + 5 WHERE name = 'tick'"))
    saved = client.submit("/schedule/edit", name="tick", version=form_version(page),
                          kind="every", every="5", queue="mine")
    assert saved.status_code == 303, saved.text
    stored = schedules.get("tick")
    assert stored.spec.options == {"queue": "mine"}
    assert stored.version == shown.version + 1


def form_version(page: str) -> str:
    return page.split('name="version" value="')[1].split('"')[0]


def form_read(page: str) -> str:
    return page.split('name="read" value="')[1].split('"')[0]


def test_an_invalid_cron_is_shown_next_to_its_field_and_changes_nothing(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    before = schedules.get("tick")

    response = client.submit("/schedule/edit", name="tick", kind="cron", cron="61 * * * *",
                             timezone="Europe/Paris", queue="")

    assert response.status_code == 422
    assert "minute field" in error_of(response.text, "cron")
    assert 'value="61 * * * *"' in response.text  # what was typed stays in the field
    assert schedules.get("tick") == before


def test_every_problem_is_shown_under_its_own_field(client: Browser,
                                                    schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    response = client.submit("/schedule/edit", name="tick", kind="cron", cron="* * *",
                             timezone="Mars/Olympus", queue="")
    assert response.status_code == 422
    assert "5 fields" in error_of(response.text, "cron")
    assert "unknown zone" in error_of(response.text, "timezone")

    response = client.submit("/schedule/edit", name="tick", kind="every", every="soon",
                             queue="")
    assert "cannot read 'soon' as a duration" in error_of(response.text, "every")
    assert schedules.get("tick").spec.trigger.params == {"every": 60.0}


def test_a_one_time_instant_without_offset_is_read_in_the_zone_given(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("once", "proj.tasks.tick", every=60)
    response = client.submit("/schedule/edit", name="once", kind="at", at="2099-12-24T18:00",
                             timezone="Europe/Paris", queue="")
    assert response.status_code == 303, response.text
    assert schedules.get("once").spec.trigger.params["at"] == "2099-12-24T17:00:00+00:00"


def test_creating_and_removing_an_api_schedule(client: Browser, schedules: Schedules) -> None:
    response = client.submit("/new", name="fresh", task="proj.tasks.tick", kind="every",
                             every="5m", timezone="UTC", queue="q1", args="[1, \"a\"]",
                             kwargs='{"k": true}')
    assert response.status_code == 303, response.text
    created = schedules.get("fresh")
    assert created.spec.source is ScheduleSource.API
    assert created.spec.trigger.params == {"every": 300.0}
    assert created.spec.args == (1, "a") and created.spec.kwargs == {"k": True}
    assert created.spec.options == {"queue": "q1"}

    # A post without the confirmation page's field removes nothing: it asks to confirm.
    asked = client.submit("/schedule/delete", name="fresh")
    assert asked.status_code == 303 and "/schedule/delete?name=fresh" in asked.headers["location"]
    assert [s.name for s in schedules.list()] == ["fresh"]
    confirm = client.get(asked.headers["location"]).text
    assert 'name="confirm" value="remove"' in confirm and "history of runs stays" in confirm

    removed = client.submit("/schedule/delete", name="fresh", confirm="remove")
    assert removed.status_code == 303
    assert schedules.list() == []
    assert "Removed" in client.get(removed.headers["location"]).text


def test_creating_with_problems_shows_each_and_stores_nothing(
        client: Browser, schedules: Schedules) -> None:
    response = client.submit("/new", name="", task="", kind="cron", cron="nope",
                             timezone="UTC", queue="", args="{", kwargs="[]")
    assert response.status_code == 422
    assert "not valid JSON" in error_of(response.text, "args")
    assert "JSON object" in error_of(response.text, "kwargs")
    assert schedules.list() == []

    response = client.submit("/new", name="", task="", kind="cron", cron="nope",
                             timezone="UTC", queue="", args="[]", kwargs="{}")
    assert "must not be empty" in error_of(response.text, "name")
    assert "task" in error_of(response.text, "task")
    assert error_of(response.text, "cron")
    assert schedules.list() == []


def test_a_taken_name_is_shown_under_the_name(client: Browser, schedules: Schedules) -> None:
    schedules.create("taken", "proj.tasks.tick", every=60)
    response = client.submit("/new", name="taken", task="proj.tasks.tick", kind="every",
                             every="60", timezone="UTC", queue="", args="", kwargs="")
    assert response.status_code == 422
    assert "already exists" in error_of(response.text, "name")


def test_config_schedules_cannot_be_edited_or_removed_here(
        client: Browser, schedules: Schedules) -> None:
    config_schedule(schedules.store, "from-config")
    before = schedules.get("from-config")

    for path, fields in (("/schedule/edit", {"kind": "every", "every": "5", "queue": ""}),
                         ("/schedule/delete", {})):
        response = client.submit(path, name="from-config", **fields)
        assert response.status_code == 422
        assert "beat_schedule" in response.text

    assert schedules.get("from-config") == before


def test_an_action_on_a_missing_schedule_is_a_404(client: Browser) -> None:
    assert client.submit("/schedule/pause", name="ghost").status_code == 404


def test_editing_args_kwargs_and_options(client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60, args=(1,), kwargs={"a": 1},
                     options={"queue": "old", "countdown": 5})
    before = schedules.get("tick")

    response = client.submit(
        "/schedule/edit", name="tick", kind="every", every="60", queue="fast", priority="7",
        expires="5m", options='{"routing_key": "r.tick", "headers": {"team": "ops"}}',
        args='[2, "zwei", null]', kwargs='{"dry_run": true, "label": "été"}')

    assert response.status_code == 303, response.text
    after = schedules.get("tick")
    assert after.spec.args == (2, "zwei", None)
    assert after.spec.kwargs == {"dry_run": True, "label": "été"}
    assert after.spec.options == {"queue": "fast", "priority": 7, "expires": 300,
                                  "routing_key": "r.tick", "headers": {"team": "ops"}}
    # Not a trigger change: the schedule keeps its next run.
    assert after.next_run_at == before.next_run_at


def test_the_edit_form_shows_what_is_stored_and_saving_it_unchanged_changes_nothing(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", cron="*/5 * * * *", timezone="Asia/Tokyo",
                     args=("a", 2.5), kwargs={"k": ["v", "é"]},
                     options={"queue": "q", "priority": 3, "expires": 90.5, "countdown": 2})
    before = schedules.get("tick")
    html = client.get("/schedule", params={"name": "tick"}).text

    fields = {name: html_module.unescape(value) for name, value in re.findall(
        r'<input id="(\w+)" name="\w+" type="text" value="([^"]*)"', html)}

    assert fields["queue"] == "q" and fields["priority"] == "3" and fields["expires"] == "90.5"
    assert fields["options"] == '{"countdown": 2}'
    assert fields["args"] == '["a", 2.5]' and fields["kwargs"] == '{"k": ["v", "é"]}'
    response = client.submit("/schedule/edit", name="tick", kind="cron", **{
        key: fields[key] for key in ("cron", "timezone", "queue", "priority", "expires",
                                     "options", "args", "kwargs")})
    assert response.status_code == 303, response.text
    assert schedules.get("tick") == before


def test_a_field_the_form_did_not_send_keeps_what_is_stored(client: Browser,
                                                            schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60, args=(1,), options={"priority": 1})

    response = client.submit("/schedule/edit", name="tick", kind="every", every="120")

    assert response.status_code == 303, response.text
    spec = schedules.get("tick").spec
    assert spec.trigger.params == {"every": 120.0}
    assert spec.args == (1,) and spec.options == {"priority": 1}


def test_invalid_args_kwargs_and_options_are_shown_under_their_fields_and_change_nothing(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60, args=(1,), kwargs={"a": 1},
                     options={"queue": "q"})
    before = schedules.get("tick")

    unreadable = client.submit("/schedule/edit", name="tick", kind="every", every="60",
                               args="[1,", kwargs='["not", "an", "object"]', options="nope",
                               expires="soon", queue="q", priority="")
    assert unreadable.status_code == 422
    assert "not valid JSON" in error_of(unreadable.text, "args")
    assert "JSON object" in error_of(unreadable.text, "kwargs")
    assert "not valid JSON" in error_of(unreadable.text, "options")
    assert "cannot read 'soon' as a duration" in error_of(unreadable.text, "expires")
    assert 'value="[1,"' in unreadable.text  # what was typed stays in its field

    refused = client.submit("/schedule/edit", name="tick", kind="every", every="60",
                            args="[]", kwargs="{}", queue="q", priority="300", expires="0",
                            options='{"retry": true, "serializer": "nope"}')
    assert refused.status_code == 422
    assert "integer from 0 to 255" in error_of(refused.text, "priority")
    assert "more than 0" in error_of(refused.text, "expires")
    options_errors = re.findall(r'<p class="field-error" id="options-error">([^<]*)</p>',
                                refused.text)
    assert any("retries a refused message" in e for e in options_errors)
    assert any("unknown serializer" in e for e in options_errors)

    twice = client.submit("/schedule/edit", name="tick", kind="every", every="60",
                          args="[]", kwargs="{}", queue="q", priority="", expires="",
                          options='{"queue": "other"}')
    assert twice.status_code == 422
    assert "give it in one place" in error_of(twice.text, "queue")

    assert schedules.get("tick") == before


def test_creating_with_options(client: Browser, schedules: Schedules) -> None:
    response = client.submit("/new", name="opts", task="proj.tasks.tick", kind="every",
                             every="60", timezone="UTC", queue="", priority="9",
                             expires="1h", options='{"time_limit": 30}', args="", kwargs="")
    assert response.status_code == 303, response.text
    assert schedules.get("opts").spec.options == {"priority": 9, "expires": 3600,
                                                  "time_limit": 30}


def test_a_row_with_unreadable_args_is_repaired_by_saving_its_form(
        client: Browser, schedules: Schedules, tables: sa.Engine) -> None:
    insert_row(tables, "mangled", args="5")
    assert schedules.get("mangled").damage

    refused = client.submit("/schedule/pause", name="mangled")
    assert refused.status_code == 422
    assert "cannot be read as stored" in refused.text

    response = client.submit("/schedule/edit", name="mangled", kind="every", every="60",
                             args='["fixed"]')
    assert response.status_code == 303, response.text
    repaired = schedules.get("mangled")
    assert not repaired.damage and repaired.spec.args == ("fixed",)


def test_a_recurrence_rule_or_solar_schedule_is_edited_through_its_own_field(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("fortnightly", "proj.tasks.tick",
                     rrule="DTSTART:20260105T090000\nRRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=TU",
                     timezone="Europe/Paris")
    schedules.create("dawn", "proj.tasks.tick", solar=("sunrise", 48.85, 2.35))
    for name, kind in (("fortnightly", "rrule"), ("dawn", "solar")):
        page = client.get(f"/schedule?name={name}").text
        if kind == "rrule":  # several lines: a text area keeps its line breaks
            area = page.split(f'<textarea id="{kind}" name="{kind}"')[1]
            shown = html_module.unescape(area.split(">", 1)[1].split("</textarea>")[0])
            assert "\n" in shown, shown
        else:
            shown = html_module.unescape(page.split(f'name="{kind}" type="text" value="')[1]
                                         .split('"')[0])
        assert shown, page  # the stored trigger fills its field
        before = schedules.get(name).spec.trigger
        sent = shown.replace("\n", "\r\n")  # as a browser sends a text area
        saved = client.submit("/schedule/edit", name=name, version=form_version(page),
                              kind=kind, **{kind: sent}, timezone="Europe/Paris",
                              queue="mine")
        assert saved.status_code == 303, saved.text
        stored = schedules.get(name)
        assert stored.spec.options == {"queue": "mine"} and stored.spec.trigger == before

    refused = client.submit("/schedule/edit", name="dawn",
                            version=str(schedules.get("dawn").version), kind="solar",
                            solar="sunrise north", timezone="Europe/Paris")
    assert refused.status_code == 422
    assert "is not an event, a latitude and a longitude" in html_module.unescape(refused.text)
