"""Bad schedule input is refused with every problem named, and nothing reaches the store.

Schedules reach a store through the schedules API (which checks them with
``ScheduleSpec.problems()`` and the trigger registry) or through validated ``Settings``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.triggers import TriggerRegistry
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import TriggerSpec

from .conftest import Store
from .support import interval_spec

BAD_SCHEDULES: dict[str, tuple[dict[str, Any], str]] = {
    "invalid-interval": ({"every": -5}, "every"),
    "zero-interval": ({"every": 0}, "every"),
    "unknown-misfire-policy": ({"every": 60, "misfire_policy": "sometimes"}, "misfire_policy"),
    "negative-grace": ({"every": 60, "misfire_grace": -1}, "misfire_grace"),
}


@pytest.mark.parametrize("given,field", list(BAD_SCHEDULES.values()), ids=list(BAD_SCHEDULES))
def test_a_bad_schedule_is_refused_naming_the_field_and_stores_nothing(
    store: Store, given: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Schedules(store).create("report", "proj.tasks.tick", **given)

    assert any(field in problem for problem in refused.value.problems), refused.value.problems
    assert store.list_schedules() == []


def test_every_problem_of_a_schedule_is_reported_at_once(store: Store) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Schedules(store).create("report", "proj.tasks.tick", every=-5,
                                misfire_policy="sometimes", misfire_grace=-1)

    text = "\n".join(refused.value.problems)
    assert all(name in text for name in ("every", "misfire_policy", "misfire_grace"))
    assert store.list_schedules() == []


def test_the_checks_behind_the_api_name_the_field() -> None:
    with pytest.raises(ConfigurationError, match="every"):
        TriggerRegistry.default().build(TriggerSpec(kind="interval", params={"every": -5}))
    with pytest.raises(ConfigurationError, match="misfire_policy"):
        Settings(misfire_policy="sometimes")
    with pytest.raises(ConfigurationError, match="misfire_grace"):
        Settings(misfire_grace=-1)
    problems = interval_spec("report", misfire_grace=timedelta(seconds=-1)).problems()
    assert any("misfire_grace" in str(problem) for problem in problems)
