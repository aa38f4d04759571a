"""A configuration problem is data from where it is found to the ConfigurationError that lists
it: nothing on the way is written as text and read back."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery import Celery
from celery.schedules import crontab

from goatbeat_celery.config import load
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem


def make_app(**conf: object) -> Celery:
    app = Celery("problems", set_as_current=False)
    app.conf.update(goatbeat_database_url="memory://", **conf)
    return app


def test_every_problem_of_the_configuration_is_found_as_data() -> None:
    # Nothing can read a problem back from its text: there is no such reader.
    assert not any(callable(getattr(Problem, name, None)) for name in ("read", "parse"))
    app = make_app(
        goatbeat_lease_ttl=-1, goatbeat_statement_timeout="soon", goatbeat_metrics_port="x",
        goatbeat_metrics_address="", goatbeat_allowed_tasks=[], goatbeat_session_locks="yes",
        goatbeat_occurrence_hook="no_such_module:hook", goatbeat_webhooks=["ftp://x"],
        goatbeat_webhook_timeout="later", goatbeat_databse_url="memory://", timezone="Mars/Base",
        beat_schedule={
            "bad": {"task": "t", "schedule": timedelta(0), "args": 1, "kwargs": 2, "extra": 3,
                    "options": {"goatbeat": {"timezone": "Nowhere/At_All", "enabled": "no",
                                             "colour": "red"}}},
            "cron": {"task": "t", "schedule": crontab(minute="0"),
                     "options": {"goatbeat": {"timezone": "Not/A_Zone"}}},
            "none": {"task": "t"},
            "odd": {"task": "t", "schedule": object()},
            "flat": "not a dict",
        })

    with pytest.raises(ConfigurationError) as raised:
        load(app)

    fields = {problem.field for problem in raised.value.details}
    assert {"goatbeat_lease_ttl", "goatbeat_statement_timeout", "goatbeat_metrics_port",
            "goatbeat_metrics_address", "goatbeat_allowed_tasks", "goatbeat_session_locks",
            "goatbeat_occurrence_hook", "goatbeat_webhooks[0]", "goatbeat_webhook_timeout",
            "goatbeat_databse_url", "timezone", "beat_schedule['bad'].schedule",
            "beat_schedule['bad'].args", "beat_schedule['bad'].kwargs",
            "beat_schedule['bad'].extra", "beat_schedule['bad'].options.goatbeat.enabled",
            "beat_schedule['bad'].options.goatbeat.colour",
            "beat_schedule['bad'].options.goatbeat.timezone",
            "beat_schedule['cron'].schedule", "beat_schedule['none'].schedule",
            "beat_schedule['odd'].schedule", "beat_schedule['flat']"} <= fields
    assert raised.value.problems == tuple(map(str, raised.value.details))
