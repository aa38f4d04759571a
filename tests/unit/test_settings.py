"""Engine settings: validated as a whole, durations as seconds or timedelta, frozen."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import MisfirePolicy


def problems(**kwargs: object) -> tuple[str, ...]:
    with pytest.raises(ConfigurationError) as raised:
        Settings(**kwargs)  # type: ignore[arg-type]
    return raised.value.problems


def test_the_defaults_are_valid_and_no_grace_drops_a_late_run() -> None:
    settings = Settings()

    assert settings.lease_ttl == timedelta(seconds=30)
    assert settings.lease_renew_interval == timedelta(seconds=10)
    assert settings.local_validity == timedelta(seconds=20)
    # As Celery's beat: the most recent missed occurrence runs once, however late.
    assert settings.misfire_grace is None
    assert settings.misfire_policy is MisfirePolicy.LATEST


@pytest.mark.parametrize("given", [0, 90, "1m30s", timedelta(days=7)])
def test_a_grace_is_opted_into_by_setting_it(given: object) -> None:
    grace = Settings(misfire_grace=given).misfire_grace  # type: ignore[arg-type]

    assert isinstance(grace, timedelta)
    assert grace == Settings(misfire_grace=grace).misfire_grace


def test_a_grace_longer_than_seven_days_is_refused() -> None:
    assert problems(misfire_grace=timedelta(days=7, seconds=1))[0].startswith("misfire_grace")


def test_every_problem_is_reported_at_once() -> None:
    found = problems(lease_ttl=-5, misfire_policy="sometimes", batch_size=0)

    assert [p.split(":")[0] for p in found] == \
        ["lease_ttl", "batch_size", "misfire_policy"]
    assert "unknown policy 'sometimes'; use one of: latest, all, skip" in found[2]


def test_a_renew_interval_not_shorter_than_the_ttl_is_reported_with_the_others() -> None:
    found = problems(lease_ttl=30, lease_renew_interval=30, misfire_policy="never",
                     misfire_grace=-1)

    assert {p.split(":")[0] for p in found} == \
        {"misfire_policy", "lease_renew_interval", "misfire_grace"}
    assert any("must be shorter than lease_ttl" in p for p in found)


def test_the_error_message_lists_every_problem() -> None:
    with pytest.raises(ConfigurationError) as raised:
        Settings(lease_ttl=-5, misfire_policy="sometimes",  # type: ignore[arg-type]
                 retention=-1)

    message = str(raised.value)
    assert message.startswith("invalid goatbeat settings (3 problems):")
    assert all(f"  - {p}" in message for p in raised.value.problems)


@pytest.mark.parametrize(("field", "value"), [
    ("lease_ttl", 0), ("lease_renew_interval", -1), ("max_interval", 0), ("retry_backoff", 0),
    ("retry_backoff_max", timedelta(seconds=-1)), ("misfire_grace", -0.5), ("retention", -1),
    ("max_catchup", 0), ("batch_size", -3), ("batch_size", 1_001), ("prune_batch", 1.5),
    ("max_catchup", True),
    ("lease_name", ""), ("lease_name", "   "), ("lease_ttl", "soon"),
    ("alert_missed", -1), ("alert_lost", 21), ("alert_lost", "yes"),
], ids=lambda value: str(value))
def test_a_bad_value_is_reported_naming_its_field(field: str, value: object) -> None:
    found = problems(**{field: value})

    assert found[0].startswith(f"{field}:")


def test_durations_accept_seconds_or_timedeltas() -> None:
    from_seconds = Settings(lease_ttl=12, lease_renew_interval=2.5, misfire_grace=90)
    from_deltas = Settings(lease_ttl=timedelta(seconds=12),
                           lease_renew_interval=timedelta(seconds=2.5),
                           misfire_grace=timedelta(minutes=1, seconds=30))

    assert from_seconds == from_deltas
    assert from_seconds.lease_ttl == timedelta(seconds=12)
    assert from_seconds.lease_renew_interval == timedelta(seconds=2.5)
    assert from_seconds.local_validity == timedelta(seconds=9.5)


def test_the_policy_may_be_given_by_name() -> None:
    assert Settings(misfire_policy="all").misfire_policy is MisfirePolicy.ALL


def test_settings_are_frozen() -> None:
    settings = Settings()

    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.lease_ttl = timedelta(seconds=1)  # type: ignore[misc]


def test_settings_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        Settings("default")  # type: ignore[misc]


def test_as_dict_gives_plain_values_for_display() -> None:
    shown = Settings(lease_ttl=45, lease_renew_interval=15, misfire_policy="skip").as_dict()

    assert shown["lease_ttl"] == 45.0
    assert shown["lease_renew_interval"] == 15.0
    assert shown["misfire_policy"] == "skip"
    assert shown["batch_size"] == 500


def test_alert_missed_and_lost_are_counts_and_still_take_true_or_false() -> None:
    assert (Settings().alert_missed, Settings().alert_lost) == (1, 1)
    assert (Settings(alert_missed=3, alert_lost=2).alert_missed,
            Settings(alert_missed=3, alert_lost=2).alert_lost) == (3, 2)
    switched = Settings(alert_missed=False, alert_lost=True)
    assert (switched.alert_missed, switched.alert_lost) == (0, 1)
    assert type(switched.alert_missed) is int and type(switched.alert_lost) is int
