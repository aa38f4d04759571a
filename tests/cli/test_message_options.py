"""``add`` and ``edit`` set every ``apply_async`` option a schedule may carry, checked by the
API with every other problem (named as the options typed); ``edit`` removes one with ""."""

from __future__ import annotations

from goatbeat_celery.cli.sending import MESSAGE_OPTIONS
from goatbeat_celery.core.rules.validation import OPTION_CHECKS
from goatbeat_celery.store import Store

from .conftest import Cli


def test_every_option_a_schedule_may_carry_has_an_option() -> None:
    assert sorted(option.key for option in MESSAGE_OPTIONS) == sorted(OPTION_CHECKS)


def test_add_stores_each_message_option_as_the_api_takes_it(cli: Cli, store: Store) -> None:
    cli.ok("add", "report", "proj.tasks.report", "--every", "60", "--queue", "reports",
           "--exchange", "jobs", "--routing-key", "jobs.report", "--priority", "7",
           "--expires", "5m", "--countdown", "10", "--time-limit", "1h",
           "--soft-time-limit", "50m", "--serializer", "json", "--compression", "zlib",
           "--headers", '{"tenant": "acme"}', "--shadow", "report", "--ignore-result", "true",
           "--delivery-mode", "2")

    assert store.get_schedule("report").spec.options == {
        "queue": "reports", "exchange": "jobs", "routing_key": "jobs.report", "priority": 7,
        "expires": 300, "countdown": 10, "time_limit": 3600, "soft_time_limit": 3000,
        "serializer": "json", "compression": "zlib", "headers": {"tenant": "acme"},
        "shadow": "report", "ignore_result": True, "delivery_mode": 2}


def test_edit_changes_and_removes_only_the_options_given(cli: Cli, store: Store) -> None:
    cli.ok("add", "report", "proj.tasks.report", "--every", "60", "--queue", "reports",
           "--priority", "7", "--delivery-mode", "persistent")

    cli.ok("edit", "report", "--priority", "", "--expires", "90s")

    assert store.get_schedule("report").spec.options == {
        "queue": "reports", "delivery_mode": "persistent", "expires": 90}


def test_values_out_of_range_are_refused_together_naming_the_options(cli: Cli,
                                                                     store: Store) -> None:
    result = cli.fails("add", "report", "proj.tasks.report", "--every", "60",
                       "--priority", "300", "--countdown", "2d", "--delivery-mode", "3",
                       "--max-catchup", "0", "--failure-backoff-factor", "0.5")

    for option in ("--priority", "--countdown", "--delivery-mode", "--max-catchup",
                   "--failure-backoff-factor"):
        assert f"{option}: " in result.output, option
    assert store.list_schedules() == []
