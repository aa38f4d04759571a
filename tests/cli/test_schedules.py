"""add, list, show, edit, pause, resume and remove, checked against what PostgreSQL stores."""

from __future__ import annotations

from datetime import datetime, timedelta

from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.spec import MisfirePolicy, ScheduleSource
from goatbeat_celery.store import Store

from .conftest import (
    Cli,
    config_schedule,
    field_lines,
    instant,
    table_instant,
    table_rows,
)


# -- add ------------------------------------------------------------------------------------
def test_add_every_stores_an_interval_schedule_on_the_epoch_grid(cli: Cli, store: Store) -> None:
    before = store.now()

    shown = cli.json("add", "poll", "feeds.poll", "--every", "30")

    stored = store.get_schedule("poll")
    assert stored.spec.task == "feeds.poll"
    assert stored.spec.trigger.to_json() == {"kind": "interval", "every": 30.0}
    assert stored.spec.source is ScheduleSource.API and stored.spec.enabled
    next_run = instant(shown["next_run_at"])
    assert next_run == stored.next_run_at
    assert next_run is not None and before < next_run <= before + timedelta(seconds=30)
    assert next_run.timestamp() % 30 == 0
    assert shown["description"] == "every 30s"
    assert shown["source"] == "api"


def test_add_cron_stores_zone_arguments_queue_and_misfire_settings(
    cli: Cli, store: Store
) -> None:
    shown = cli.json(
        "add", "report", "proj.report", "--cron", "0 7 * * mon-fri",
        "--timezone", "America/New_York", "--args", '[1, "a"]', "--kwargs", '{"full": true}',
        "--queue", "reports", "--misfire-policy", "all", "--misfire-grace", "600",
        "--max-catchup", "3",
    )

    spec = store.get_schedule("report").spec
    assert spec.trigger.kind == "cron"
    assert spec.trigger.params["expression"] == "0 7 * * mon-fri"
    assert spec.trigger.params["timezone"] == "America/New_York"
    assert spec.args == (1, "a") and dict(spec.kwargs) == {"full": True}
    assert dict(spec.options) == {"queue": "reports"}
    assert spec.misfire_policy is MisfirePolicy.ALL
    assert spec.misfire_grace == timedelta(seconds=600) and spec.max_catchup == 3
    assert shown["timezone"] == "America/New_York"
    assert (shown["args"], shown["kwargs"], shown["options"]) == (
        [1, "a"], {"full": True}, {"queue": "reports"})
    assert (shown["misfire_policy"], shown["misfire_grace"], shown["max_catchup"]) == (
        "all", 600.0, 3)
    next_run = instant(shown["next_run_at"])
    assert next_run is not None
    local = next_run.astimezone(_zone("America/New_York"))
    assert (local.hour, local.minute) == (7, 0) and local.weekday() < 5


def test_add_cron_without_a_zone_uses_the_app_timezone(cli: Cli, store: Store) -> None:
    cli.configure(timezone="Asia/Kolkata")

    shown = cli.json("add", "report", "proj.report", "--cron", "30 2 * * *")

    assert shown["timezone"] == "Asia/Kolkata"
    assert store.get_schedule("report").spec.trigger.params["timezone"] == "Asia/Kolkata"


def test_add_at_stores_a_one_off_run_at_that_instant(cli: Cli, store: Store) -> None:
    shown = cli.json("add", "launch", "proj.launch", "--at", "2030-01-01T09:00:00+01:00")

    expected = datetime(2030, 1, 1, 8, 0, tzinfo=UTC)
    assert instant(shown["next_run_at"]) == expected
    assert store.get_schedule("launch").next_run_at == expected
    assert shown["description"] == "once at 2030-01-01T08:00:00Z"


def test_add_at_accepts_z_for_utc(cli: Cli) -> None:
    shown = cli.json("add", "launch", "proj.launch", "--at", "2030-01-01T08:00:00Z")

    assert instant(shown["next_run_at"]) == datetime(2030, 1, 1, 8, 0, tzinfo=UTC)


def test_add_paused_stores_a_disabled_schedule_that_does_not_run(cli: Cli, store: Store) -> None:
    shown = cli.json("add", "poll", "feeds.poll", "--every", "60", "--paused")

    stored = store.get_schedule("poll")
    assert not stored.spec.enabled and stored.next_run_at is None
    assert shown["enabled"] is False
    assert store.due_schedules(10).next_due_at is None


def test_add_offset_shifts_every_occurrence(cli: Cli) -> None:
    shown = cli.json("add", "poll", "feeds.poll", "--every", "60", "--offset", "15")

    next_run = instant(shown["next_run_at"])
    assert next_run is not None and next_run.timestamp() % 60 == 15
    assert (shown["offset"], shown["effective_offset"]) == (15.0, 15.0)


def test_add_jitter_shifts_by_a_stable_amount_below_it(cli: Cli, store: Store) -> None:
    shown = cli.json("add", "poll", "feeds.poll", "--every", "60", "--jitter", "20")

    assert shown["jitter"] == 20.0
    assert 0 <= shown["effective_offset"] < 20
    assert store.get_schedule("poll").spec.effective_offset().total_seconds() == \
        shown["effective_offset"]


def test_add_prints_the_stored_schedule_for_people(cli: Cli) -> None:
    output = cli.ok("add", "poll", "feeds.poll", "--every", "90").stdout

    assert output.splitlines()[0] == "added 'poll'"
    assert "every 1m30s" in output
    assert "default (latest)" in output


# -- list -----------------------------------------------------------------------------------
def test_list_shows_each_schedule_with_trigger_zone_runs_state_source_and_policy(
    cli: Cli, store: Store
) -> None:
    cli.ok("add", "report", "proj.report", "--cron", "0 7 * * *", "--timezone", "Europe/Paris",
           "--misfire-policy", "skip")
    cli.ok("add", "poll", "feeds.poll", "--every", "30", "--paused")
    config_schedule(store, "from-config")

    rows = {row["NAME"]: row for row in table_rows(cli.ok("list", "--wide").stdout)}

    assert list(rows) == ["from-config", "poll", "report"]
    report = rows["report"]
    assert (report["TASK"], report["TRIGGER"], report["ZONE"]) == (
        "proj.report", "cron 0 7 * * *", "Europe/Paris")
    assert (report["STATE"], report["SOURCE"], report["MISFIRE"]) == ("enabled", "api", "skip")
    assert report["NEXT RUN"] == table_instant(store.get_schedule("report").next_run_at)
    assert report["LAST RUN"] == "-"
    assert (rows["poll"]["STATE"], rows["poll"]["NEXT RUN"]) == ("paused", "-")
    assert rows["poll"]["MISFIRE"] == "default (latest)"
    assert rows["from-config"]["SOURCE"] == "config"


def test_list_json_gives_every_schedule_in_name_order(cli: Cli, store: Store) -> None:
    cli.ok("add", "b", "t.b", "--every", "60")
    cli.ok("add", "a", "t.a", "--every", "60")

    listed = cli.json("list")

    assert [s["name"] for s in listed] == ["a", "b"]
    assert instant(listed[0]["next_run_at"]) == store.get_schedule("a").next_run_at
    assert listed[0]["version"] == 1 and listed[0]["total_runs"] == 0


def test_list_filters_by_state_source_and_prefix(cli: Cli, store: Store) -> None:
    cli.ok("add", "feeds.poll", "feeds.poll", "--every", "60")
    cli.ok("add", "feeds.paused", "feeds.poll", "--every", "60", "--paused")
    cli.ok("add", "report", "proj.report", "--every", "60")
    config_schedule(store, "feeds.config")

    def names(*options: str) -> list[str]:
        return [s["name"] for s in cli.json("list", *options)]

    assert names("--enabled") == ["feeds.config", "feeds.poll", "report"]
    assert names("--disabled") == ["feeds.paused"]
    assert names("--source", "config") == ["feeds.config"]
    assert names("--source", "api") == ["feeds.paused", "feeds.poll", "report"]
    assert names("--prefix", "feeds.") == ["feeds.config", "feeds.paused", "feeds.poll"]
    assert names("--prefix", "feeds.", "--enabled", "--source", "api") == ["feeds.poll"]


def test_list_says_when_there_is_nothing_to_show(cli: Cli) -> None:
    assert cli.ok("list").stdout.strip() == "no schedules yet"
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    assert cli.ok("list", "--disabled").stdout.strip() == "no schedules match"
    assert cli.json("list", "--disabled") == []


# -- show -----------------------------------------------------------------------------------
def test_show_json_is_the_stored_schedule(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60", "--kwargs", '{"n": 1}')

    shown = cli.json("show", "poll")

    stored = store.get_schedule("poll")
    assert shown["name"] == "poll" and shown["kwargs"] == {"n": 1}
    assert instant(shown["next_run_at"]) == stored.next_run_at
    assert instant(shown["created_at"]) == stored.created_at
    assert shown["effective_misfire_policy"] == "latest"
    assert shown["effective_misfire_grace"] is None  # no grace: a late run runs however late


def test_show_lists_every_detail_for_people(cli: Cli, store: Store) -> None:
    cli.ok("add", "report", "proj.report", "--cron", "0 7 * * *", "--timezone", "Europe/Paris",
           "--queue", "reports")
    next_run = table_instant(store.get_schedule("report").next_run_at)

    lines = field_lines(cli.ok("show", "report").stdout)

    assert lines["task"] == "proj.report"
    assert lines["trigger"] == "cron 0 7 * * *"
    assert lines["zone"] == "Europe/Paris"
    assert lines["options"] == '{"queue": "reports"}'
    assert lines["state"] == "enabled"
    assert lines["next run"].startswith(f"{next_run} (in ")
    assert lines["misfire policy"] == "default (latest)"


# -- edit -----------------------------------------------------------------------------------
def test_edit_changes_only_the_options_given(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60", "--args", "[1]", "--queue", "q1",
           "--misfire-policy", "skip")
    before = store.get_schedule("poll")

    shown = cli.json("edit", "poll", "--kwargs", '{"n": 2}')

    after = store.get_schedule("poll")
    assert dict(after.spec.kwargs) == {"n": 2}
    assert after.spec.args == (1,) and dict(after.spec.options) == {"queue": "q1"}
    assert after.spec.misfire_policy is MisfirePolicy.SKIP
    assert after.spec.trigger == before.spec.trigger
    assert after.next_run_at == before.next_run_at  # not a timing change: the run stays
    assert after.version == before.version + 1 == shown["version"]


def test_edit_trigger_reschedules_from_now(cli: Cli, store: Store) -> None:
    cli.ok("add", "report", "proj.report", "--cron", "0 7 * * *", "--timezone", "UTC")

    shown = cli.json("edit", "report", "--every", "45")

    stored = store.get_schedule("report")
    assert stored.spec.trigger.to_json() == {"kind": "interval", "every": 45.0}
    assert stored.next_run_at is not None and stored.next_run_at.timestamp() % 45 == 0
    assert stored.next_run_at - store.now() <= timedelta(seconds=45)
    assert instant(shown["next_run_at"]) == stored.next_run_at


def test_edit_timezone_alone_keeps_the_cron_expression(cli: Cli, store: Store) -> None:
    cli.ok("add", "report", "proj.report", "--cron", "0 7 * * *", "--timezone", "UTC")

    cli.ok("edit", "report", "--timezone", "Asia/Tokyo")

    params = store.get_schedule("report").spec.trigger.params
    assert (params["expression"], params["timezone"]) == ("0 7 * * *", "Asia/Tokyo")
    next_run = store.get_schedule("report").next_run_at
    assert next_run is not None and next_run.astimezone(_zone("Asia/Tokyo")).hour == 7


def test_edit_task_and_an_empty_queue_go_back_to_default_routing(
    cli: Cli, store: Store
) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60", "--queue", "slow")

    cli.ok("edit", "poll", "--task", "feeds.poll_v2", "--queue", "")

    spec = store.get_schedule("poll").spec
    assert spec.task == "feeds.poll_v2" and dict(spec.options) == {}


def test_edit_offset_replaces_a_jitter(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60", "--jitter", "30")

    cli.ok("edit", "poll", "--offset", "10")

    spec = store.get_schedule("poll").spec
    assert (spec.offset, spec.jitter) == (timedelta(seconds=10), None)


def test_edit_misfire_policy_default_follows_the_global_setting_again(
    cli: Cli, store: Store
) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60", "--misfire-policy", "all")

    shown = cli.json("edit", "poll", "--misfire-policy", "default")

    assert store.get_schedule("poll").spec.misfire_policy is None
    assert (shown["misfire_policy"], shown["effective_misfire_policy"]) == (None, "latest")


def test_edit_paused_and_enabled_switch_a_schedule_in_one_write(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    paused = cli.json("edit", "poll", "--paused", "--args", "[7]")
    assert paused["enabled"] is False and paused["args"] == [7]
    assert paused["version"] == 2

    enabled = cli.json("edit", "poll", "--enabled")
    stored = store.get_schedule("poll")
    assert stored.spec.enabled and enabled["enabled"] is True
    assert stored.next_run_at is not None and stored.next_run_at > store.now()


def test_edit_and_remove_of_a_config_schedule_are_refused_as_every_face_refuses_them(
    cli: Cli, store: Store
) -> None:
    config_schedule(store, "from-config")
    before = store.get_schedule("from-config")

    edited = cli.fails("edit", "from-config", "--args", "[1]")
    removed = cli.fails("remove", "from-config", "--yes")
    paused = cli.ok("pause", "from-config")
    noted = cli.ok("pause", "from-config", "--note", "maintenance")

    for refused in (edited, removed):
        assert ("schedule 'from-config' comes from the app's beat_schedule: the next config "
                "sync (when a replica becomes leader) puts back the configured version, so it "
                "is changed there") in refused.output
        assert "goatbeat sync --plan" in refused.output
    assert store.get_schedule("from-config").spec.args == before.spec.args
    # A pause without a note is undone by the next sync: said; one with a note is kept.
    assert "give --note to keep it paused" in paused.stderr
    assert "warning" not in noted.stderr


# -- pause, resume, remove ------------------------------------------------------------------
def test_pause_then_resume_runs_again_from_the_next_occurrence(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    paused = cli.json("pause", "poll")
    assert paused["enabled"] is False and not store.get_schedule("poll").spec.enabled

    before = store.now()
    resumed = cli.json("resume", "poll")
    stored = store.get_schedule("poll")
    after = store.now()
    assert resumed["enabled"] is True and stored.spec.enabled
    # The next occurrence after the moment of resuming: not before it, at most one interval on.
    assert stored.next_run_at is not None
    assert before < stored.next_run_at <= after + timedelta(seconds=60)


def test_pause_of_a_paused_schedule_changes_nothing(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60", "--paused")
    version = store.get_schedule("poll").row_version

    assert cli.ok("pause", "poll").stdout.startswith("'poll' was already paused; nothing changed")

    assert store.get_schedule("poll").row_version == version


def test_resume_of_a_running_schedule_says_nothing_changed(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    version = store.get_schedule("poll").row_version

    assert cli.ok("resume", "poll").stdout.startswith("'poll' was not paused; nothing changed")
    assert store.get_schedule("poll").row_version == version
    cli.ok("pause", "poll")
    assert cli.ok("resume", "poll").stdout.startswith("resumed 'poll'")


def test_next_with_a_count_out_of_range_is_a_usage_error(cli: Cli) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    for count in ("0", "1001"):
        result = cli("next", "poll", "--count", count)
        assert result.exit_code == 2, result.output
        assert "--count" in result.output


def test_remove_with_yes_deletes_the_schedule(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    assert cli.json("remove", "poll", "--yes") == {"removed": "poll"}

    assert store.list_schedules() == []


def test_remove_asks_first_and_keeps_the_schedule_on_no(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    result = cli("remove", "poll", input="n\n")

    assert result.exit_code == 1
    assert "Remove schedule 'poll'" in result.output
    assert [s.name for s in store.list_schedules()] == ["poll"]


def test_remove_deletes_after_a_yes_at_the_prompt(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")

    cli.ok("remove", "poll", input="y\n")

    assert store.list_schedules() == []


def test_remove_keeps_the_schedule_history(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    cli.ok("run-now", "poll")

    cli.ok("remove", "poll", "--yes")

    assert [e.schedule_name for e in store.executions()] == ["poll"]


# -- helpers --------------------------------------------------------------------------------
def _zone(name: str):  # type: ignore[no-untyped-def]
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)
