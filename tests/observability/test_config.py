"""goatbeat_occurrence_hook and goatbeat_metrics_port as read from app.conf."""

from __future__ import annotations

import sys
from datetime import timedelta

import pytest
from celery import Celery

from goatbeat_celery.beat.metrics import MetricsExporter
from goatbeat_celery.config import load
from goatbeat_celery.core.loop.observer import OccurrenceRecord
from goatbeat_celery.core.types.errors import ConfigurationError

from . import hooks


def make_app(**conf: object) -> Celery:
    app = Celery("obs", broker="memory://", set_as_current=False)
    app.conf.update(conf)
    return app


@pytest.mark.parametrize("path", ["tests.observability.hooks:remember",
                                  "tests.observability.hooks.remember"],
                         ids=["colon", "dotted"])
def test_a_hook_path_loads_the_function_it_names(path: str) -> None:
    loaded = load(make_app(goatbeat_occurrence_hook=path))

    assert loaded.config.occurrence_hook is hooks.remember


def test_a_callable_hook_is_used_as_given() -> None:
    def hook(record: OccurrenceRecord) -> None:
        pass

    assert load(make_app(goatbeat_occurrence_hook=hook)).config.occurrence_hook is hook


def test_no_hook_is_the_default() -> None:
    assert load(make_app()).config.occurrence_hook is None


BAD_HOOKS = {
    "missing-module": ("tests.observability.nowhere:remember", "cannot import"),
    "missing-function": ("tests.observability.hooks:forgotten", "has no attribute 'forgotten'"),
    "not-callable": ("tests.observability.hooks:not_callable", "not a callable"),
    "no-module-part": ("remember", "not a 'package.module:function' path"),
    "not-a-string": (42, "expected a callable or a 'package.module:function' path"),
}


@pytest.mark.parametrize(("value", "says"), list(BAD_HOOKS.values()), ids=list(BAD_HOOKS))
def test_a_bad_hook_is_a_configuration_problem_naming_the_setting(value: object,
                                                                  says: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load(make_app(goatbeat_occurrence_hook=value))

    [problem] = caught.value.problems
    assert problem.startswith("goatbeat_occurrence_hook: ")
    assert says in problem


def test_a_bad_hook_is_reported_with_every_other_problem() -> None:
    with pytest.raises(ConfigurationError) as caught:
        load(make_app(goatbeat_occurrence_hook="tests.observability.hooks:forgotten",
                      goatbeat_misfire_policy="sometimes",
                      beat_schedule={"neg": {"task": "t", "schedule": -1}}))

    text = "\n".join(caught.value.problems)
    assert "goatbeat_occurrence_hook" in text
    assert "goatbeat_misfire_policy" in text
    assert "beat_schedule['neg']" in text


def test_a_misspelt_hook_setting_suggests_the_right_name() -> None:
    with pytest.raises(ConfigurationError) as caught:
        load(make_app(goatbeat_ocurrence_hook="tests.observability.hooks:remember"))

    [problem] = caught.value.problems
    assert "did you mean goatbeat_occurrence_hook?" in problem


def test_a_metrics_port_is_accepted_when_prometheus_client_is_installed() -> None:
    assert load(make_app(goatbeat_metrics_port=9808)).config.metrics_port == 9808


def test_a_metrics_port_without_prometheus_client_names_the_extra_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes "import prometheus_client" raise ImportError, as when
    # the package is not installed.
    monkeypatch.setitem(sys.modules, "prometheus_client", None)

    with pytest.raises(ConfigurationError) as caught:
        load(make_app(goatbeat_metrics_port=9808, goatbeat_lease_ttl=-1))
    with pytest.raises(ConfigurationError) as started:
        MetricsExporter.start(port=0, lease_ttl=timedelta(seconds=30))

    problems = caught.value.problems
    metrics_problem = next(p for p in problems if p.startswith("goatbeat_metrics_port:"))
    assert "prometheus-client" in metrics_problem
    assert "its 'metrics' extra, which brings prometheus-client" in metrics_problem
    assert any(p.startswith("goatbeat_lease_ttl") for p in problems), "reported together"
    assert started.value.problems == (metrics_problem,)


def test_no_metrics_port_needs_no_prometheus_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)

    assert load(make_app()).config.metrics_port is None
