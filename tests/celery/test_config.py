"""Celery config → goatbeat settings and schedule specs, every form users write."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields
from datetime import datetime, timedelta, timezone

import pytest
from celery import Celery
from celery.schedules import crontab, schedule

from goatbeat_celery.config import DEFAULT_DATABASE_URL, load
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import MisfirePolicy, ScheduleSource


def make_app(**conf: object) -> Celery:
    app = Celery("cfg", broker="memory://", set_as_current=False)
    app.conf.update(conf)
    return app


def spec_named(app: Celery, name: str):
    return {spec.name: spec for spec in load(app).schedules}[name]


def test_defaults_use_a_sqlite_file_in_the_working_directory():
    loaded = load(make_app())
    assert loaded.config.database_url == DEFAULT_DATABASE_URL
    assert loaded.config.settings.misfire_policy is MisfirePolicy.LATEST
    assert loaded.schedules == ()


def test_settings_are_read_from_app_conf_with_the_goatbeat_prefix():
    loaded = load(make_app(goatbeat_lease_ttl=9, goatbeat_lease_renew_interval=3,
                           goatbeat_misfire_policy="skip", goatbeat_lease_name="green",
                           goatbeat_allowed_tasks=["app.*"], goatbeat_batch_size=50))
    settings = loaded.config.settings
    assert settings.lease_ttl == timedelta(seconds=9)
    assert settings.lease_renew_interval == timedelta(seconds=3)
    assert settings.misfire_policy is MisfirePolicy.SKIP
    assert settings.lease_name == "green"
    assert settings.batch_size == 50
    assert loaded.config.task_allowed("app.report")
    assert not loaded.config.task_allowed("os.system")


@pytest.mark.parametrize("name", [f.name for f in fields(Settings)])
def test_every_settings_field_is_read_as_a_goatbeat_setting(name):
    value = Settings().as_dict()[name]
    # A key that is not read would be refused as a stray goatbeat_ setting.
    assert load(make_app(**{f"goatbeat_{name}": value})).config.settings == Settings()


def test_the_shard_count_is_read_from_app_conf_and_one_by_default():
    assert load(make_app()).config.settings.shards == 1
    assert load(make_app(goatbeat_shards=4)).config.settings.shards == 4


@pytest.mark.parametrize("value", [30, 30.0, timedelta(seconds=30), schedule(30)],
                         ids=["int", "float", "timedelta", "schedule"])
def test_numbers_timedeltas_and_schedule_objects_become_interval_triggers(value):
    app = make_app(beat_schedule={"job": {"task": "t", "schedule": value}})
    spec = spec_named(app, "job")
    assert spec.trigger.kind == "interval"
    assert spec.trigger.params == {"every": 30.0}
    assert spec.source is ScheduleSource.CONFIG


def test_crontab_becomes_a_cron_trigger_with_and_semantics_in_the_app_zone():
    app = make_app(timezone="Europe/Paris", beat_schedule={
        "job": {"task": "t", "schedule": crontab(minute="*/15", hour="8-18",
                                                 day_of_week="mon-fri", day_of_month="1-7")},
    })
    spec = spec_named(app, "job")
    assert spec.trigger.kind == "cron"
    assert spec.trigger.params["expression"] == "*/15 8-18 1-7 * mon-fri"
    assert spec.trigger.params["timezone"] == "Europe/Paris"
    assert spec.trigger.params["day_or"] is False


def test_an_entry_zone_overrides_the_app_zone():
    app = make_app(timezone="Europe/Paris", beat_schedule={
        "job": {"task": "t", "schedule": crontab(minute=0, hour=9),
                "goatbeat": {"timezone": "America/New_York"}},
    })
    assert spec_named(app, "job").trigger.params["timezone"] == "America/New_York"


def test_crontab_with_a_set_of_minutes_is_converted():
    app = make_app(beat_schedule={"job": {"task": "t", "schedule": crontab(minute={0, 30})}})
    assert spec_named(app, "job").trigger.params["expression"].startswith("0,30 ")


def test_args_kwargs_options_and_goatbeat_options_are_kept():
    app = make_app(beat_schedule={"job": {
        "task": "t", "schedule": 10, "args": (1, "a"), "kwargs": {"k": [1, 2]},
        "options": {"queue": "q", "routing_key": "r", "priority": 3, "headers": {"h": 1},
                    "expires": timedelta(minutes=5)},
        "goatbeat": {"misfire_policy": "all", "misfire_grace": 5, "max_catchup": 3,
                     "offset": 2, "enabled": False},
    }})
    spec = spec_named(app, "job")
    assert spec.args == (1, "a")
    assert spec.kwargs == {"k": [1, 2]}
    assert spec.options == {"queue": "q", "routing_key": "r", "priority": 3,
                            "headers": {"h": 1}, "expires": 300.0}
    assert spec.misfire_policy is MisfirePolicy.ALL
    assert spec.misfire_grace == timedelta(seconds=5)
    assert spec.max_catchup == 3
    assert spec.offset == timedelta(seconds=2)
    assert spec.enabled is False


def test_add_periodic_task_entries_are_read():
    app = make_app()

    @app.task(name="cfg.ping")
    def ping(x: int) -> int:
        return x

    app.add_periodic_task(15.0, ping.s(4), name="ping-every-15")
    app.finalize()
    app.loader.import_default_modules()
    spec = spec_named(app, "ping-every-15")
    assert spec.task == "cfg.ping"
    assert spec.args == (4,)


class EveryFiveSecondsFromEpoch(schedule):
    """A user's own schedule class (not a plain interval): goes through the generic adapter."""

    def __init__(self) -> None:
        super().__init__(timedelta(seconds=5))


def test_other_schedule_classes_go_through_the_generic_adapter():
    app = make_app(beat_schedule={"own": {"task": "t", "schedule": EveryFiveSecondsFromEpoch()}})
    loaded = load(app)
    spec = {s.name: s for s in loaded.schedules}["own"]
    assert spec.trigger.kind == "celery"
    trigger = loaded.triggers.build(spec.trigger)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    following = trigger.next_after(start)
    assert following is not None and following > start


def test_every_problem_is_reported_at_once_and_names_the_field():
    app = make_app(
        goatbeat_lease_ttl=-1, goatbeat_misfire_policy="often", goatbeat_lease_tll=3,
        beat_schedule={
            "zone": {"task": "t", "schedule": crontab(minute=0),
                     "goatbeat": {"timezone": "Mars/Olympus"}},
            "negative": {"task": "t", "schedule": -5},
            "policy": {"task": "t", "schedule": 5, "goatbeat": {"misfire_policy": "sometimes",
                                                                 "misfire_grace": -1}},
            "unstorable": {"task": "t", "schedule": 5, "args": [object()]},
            "no-task": {"schedule": 5},
        },
    )
    with pytest.raises(ConfigurationError) as caught:
        load(app)
    text = str(caught.value)
    for needle in ("goatbeat_lease_ttl", "goatbeat_misfire_policy", "often",
                   "goatbeat_lease_tll", "did you mean goatbeat_lease_ttl",
                   "beat_schedule['zone']", "Mars/Olympus",
                   "beat_schedule['negative'].schedule", "beat_schedule['policy']",
                   "sometimes", "misfire_grace", "beat_schedule['unstorable'].args",
                   "beat_schedule['no-task'].task"):
        assert needle in text, f"{needle!r} missing from:\n{text}"
    assert len(caught.value.problems) >= 9


def test_numbers_beyond_a_float_in_an_entry_are_problems_naming_them():
    huge = 10**400
    app = make_app(beat_schedule={
        "interval": {"task": "t", "schedule": huge},
        "grace": {"task": "t", "schedule": 5, "goatbeat": {"misfire_grace": huge,
                                                           "failure_backoff": 60,
                                                           "failure_backoff_factor": -huge}},
    })
    with pytest.raises(ConfigurationError) as caught:
        load(app)
    text = str(caught.value)
    for needle in ("beat_schedule['interval'].schedule", "misfire_grace",
                   "failure_backoff_factor"):
        assert needle in text, f"{needle!r} missing from:\n{text}"


# -- fail closed, bounded --------------------------------------------------------------------

@pytest.mark.parametrize("url", ["", "   "], ids=["empty", "blank"])
def test_an_empty_database_url_is_an_error_not_the_local_file(url: str):
    with pytest.raises(ConfigurationError) as raised:
        load(make_app(goatbeat_database_url=url))
    assert "goatbeat_database_url: is empty" in str(raised.value)


@pytest.mark.parametrize("allowed", [[], (), ""], ids=["list", "tuple", "string"])
def test_an_empty_allow_list_is_an_error_not_every_task(allowed: object):
    with pytest.raises(ConfigurationError) as raised:
        load(make_app(goatbeat_allowed_tasks=allowed))
    assert "goatbeat_allowed_tasks" in str(raised.value)


def test_an_allow_list_left_out_allows_every_task_and_a_star_says_so_explicitly():
    assert load(make_app()).config.task_allowed("any.task")
    assert load(make_app(goatbeat_allowed_tasks=["*"])).config.task_allowed("any.task")
    assert not load(make_app(goatbeat_allowed_tasks=["app.*"])).config.task_allowed("db.drop")


@pytest.mark.parametrize(("setting", "value"), [
    ("goatbeat_retention", 1e12), ("goatbeat_misfire_grace", 1e12), ("goatbeat_lease_ttl", 1e12),
    ("goatbeat_lease_ttl", float("nan")), ("goatbeat_max_interval", float("inf")),
    ("goatbeat_retry_backoff", float("-inf")), ("goatbeat_statement_timeout", float("nan")),
    ("goatbeat_batch_size", 10**9), ("goatbeat_shards", 0), ("goatbeat_shards", 1025),
], ids=str)
def test_durations_and_counts_out_of_bounds_are_problems_not_tracebacks(setting: str,
                                                                        value: float):
    with pytest.raises(ConfigurationError) as raised:
        load(make_app(**{setting: value}))
    assert setting in str(raised.value)


def test_every_settings_problem_is_reported_at_once():
    with pytest.raises(ConfigurationError) as raised:
        load(make_app(goatbeat_retention=1e12, goatbeat_lease_ttl=float("nan"),
                      goatbeat_database_url="", goatbeat_allowed_tasks=[]))
    assert len(raised.value.problems) == 4


def test_the_metrics_exporter_binds_loopback_unless_told_otherwise():
    assert load(make_app()).config.metrics_address == "127.0.0.1"
    assert load(make_app(goatbeat_metrics_address="0.0.0.0")).config.metrics_address == "0.0.0.0"
    with pytest.raises(ConfigurationError):
        load(make_app(goatbeat_metrics_address=""))


@pytest.mark.parametrize(("options", "field"), [
    ({"retry": False}, "options.retry"), ({"countdown": "soon"}, "options.countdown"),
    ({"queue": 5}, "options.queue"), ({"task_id": "x"}, "options.task_id"),
    ({"headers": [1]}, "options.headers"), ({"priority": 300}, "options.priority"),
    ({"link": "x"}, "options.link"), ({"bogus": 1}, "options.bogus"),
], ids=str)
def test_config_entry_options_are_limited_to_what_apply_async_takes(options: dict[str, object],
                                                                    field: str):
    app = make_app(beat_schedule={"job": {"task": "app.job", "schedule": 60,
                                          "options": options}})
    with pytest.raises(ConfigurationError) as raised:
        load(app)
    assert f"beat_schedule['job'].{field}" in str(raised.value)


@pytest.mark.parametrize("every", [float("nan"), float("inf"), 1e-6, 0.5], ids=str)
def test_config_intervals_must_be_finite_and_at_least_a_second(every: float):
    app = make_app(beat_schedule={"job": {"task": "app.job", "schedule": every}})
    with pytest.raises(ConfigurationError) as raised:
        load(app)
    assert "beat_schedule['job'].schedule" in str(raised.value)


# -- settings under names goatbeat does not read -------------------------------------------

class DjangoSettings:
    """What a Django project's settings module holds, read with namespace="CELERY"."""

    CELERY_BROKER_URL = "memory://"


def django_app(**settings: object) -> Celery:
    source = type("Settings", (DjangoSettings,), settings)
    app = Celery("django", set_as_current=False)
    app.config_from_object(source, namespace="CELERY")
    return app


def test_the_namespaced_spelling_is_read_in_a_django_project():
    loaded = load(django_app(CELERY_GOATBEAT_DATABASE_URL="sqlite:///django.db",
                             CELERY_GOATBEAT_LEASE_TTL=9, CELERY_GOATBEAT_LEASE_RENEW_INTERVAL=3))
    assert loaded.config.database_url == "sqlite:///django.db"
    assert loaded.config.settings.lease_ttl == timedelta(seconds=9)


@pytest.mark.parametrize(("key", "spelling"), [
    ("GOATBEAT_DATABASE_URL", "CELERY_GOATBEAT_DATABASE_URL"),
    ("CELERY_GOATBEAT_DATABSE_URL", "CELERY_GOATBEAT_DATABASE_URL"),
    ("CELERY_goatbeat_database_url", "CELERY_GOATBEAT_DATABASE_URL"),
    ("goatbeat_databse_url", "goatbeat_database_url"),
], ids=str)
def test_a_goatbeat_setting_that_is_not_read_is_an_error_naming_the_spelling_read(
        key: str, spelling: str):
    with pytest.raises(ConfigurationError) as raised:
        load(django_app(**{key: "postgresql://db/app"}))
    assert f"{key}: unknown setting; did you mean {spelling}?" in raised.value.problems


def test_an_uppercase_setting_outside_any_namespace_is_an_error():
    with pytest.raises(ConfigurationError) as raised:
        load(make_app(GOATBEAT_DATABASE_URL="postgresql://db/app"))
    assert raised.value.problems == (
        "GOATBEAT_DATABASE_URL: unknown setting; did you mean goatbeat_database_url?",)


@pytest.mark.parametrize(("options", "field"), [
    ({"serializer": "nope"}, "options.serializer"),
    ({"compression": "nope"}, "options.compression"),
], ids=str)
def test_config_entry_serializer_and_compression_are_checked_against_kombu_at_start(
        options: dict[str, object], field: str):
    app = make_app(beat_schedule={"job": {"task": "app.job", "schedule": 60,
                                          "options": options}})
    with pytest.raises(ConfigurationError) as raised:
        load(app)
    assert f"beat_schedule['job'].{field}" in str(raised.value)


def test_settings_and_every_entry_are_reported_together_with_zones_checked_everywhere():
    app = make_app(
        goatbeat_misfire_policy="sometimes", timezone="Mars/Base",
        beat_schedule={
            "negative": {"task": "app.job", "schedule": -1},
            "zoned-interval": {"task": "app.job", "schedule": 60,
                               "goatbeat": {"timezone": "Europe/Paris"}},
            "bad-zone": {"task": "app.job", "schedule": crontab(minute=0),
                         "goatbeat": {"timezone": "Europe/Pariss"}},
        })
    with pytest.raises(ConfigurationError) as raised:
        load(app)
    fields = [problem.split(":")[0] for problem in raised.value.problems]
    assert fields == [
        "goatbeat_misfire_policy", "timezone", "beat_schedule['bad-zone'].schedule",
        "beat_schedule['negative'].schedule", "beat_schedule['zoned-interval'].goatbeat.timezone"]
    assert "'Europe/Paris'" in raised.value.problems[2], "the closest zone is suggested"


def test_lazy_arguments_are_stored_as_placeholders_and_kept_to_be_called_at_send():
    from celery.beat import BeatLazyFunc

    stamp = BeatLazyFunc(lambda: "now")
    app = make_app(beat_schedule={"job": {"task": "app.job", "schedule": 60,
                                          "args": [1, stamp], "kwargs": {"at": stamp}}})
    loaded = load(app)

    spec = spec_named(app, "job")
    assert spec.args == (1, {"__goatbeat_lazy__": "args.1"})
    assert spec.kwargs == {"at": {"__goatbeat_lazy__": "kwargs.at"}}
    assert loaded.lazy == {"job": {"args.1": stamp, "kwargs.at": stamp}}


def test_the_default_statement_timeout_stays_inside_a_short_leases_local_deadline():
    # ttl 6 s, renewed every 2 s: a leader trusts its lease for 4 s; 5 s would outlive it.
    loaded = load(make_app(goatbeat_lease_ttl=6, goatbeat_lease_renew_interval=2))
    assert loaded.config.statement_timeout == 2.0
    assert load(make_app()).config.statement_timeout == 5.0


def test_an_unreadable_starting_deadline_is_one_problem():
    with pytest.raises(ConfigurationError) as raised:
        load(make_app(goatbeat_starting_deadline="soon"))
    assert [p.split(":")[0] for p in raised.value.problems] == ["goatbeat_starting_deadline"]


def test_importing_the_migrations_says_nothing_at_info():
    # A process of its own: Alembic announces its plugins once, when it is first imported.
    code = ("import logging; logging.basicConfig(level=logging.INFO, format='%(name)s'); "
            "import goatbeat_celery.migrations")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert "alembic" not in done.stderr
