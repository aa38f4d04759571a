"""quick_init: the faster __init__ keeps every behaviour of the dataclass's own."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.quick import quick_init
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class _Slotted:
    kept: int = 1


@quick_init
@dataclass(frozen=True, kw_only=True)
class _Quick(_Slotted):
    name: str
    count: int = 3
    tags: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class _Plain(_Slotted):
    name: str
    count: int = 3
    tags: list[str] = field(default_factory=list)


def test_values_defaults_and_factories_are_those_of_the_dataclass():
    for given in ({"name": "a"}, {"name": "b", "count": 7, "tags": ["x"], "kept": 9}):
        quick, plain = _Quick(**given), _Plain(**given)  # type: ignore[arg-type]
        assert dataclasses.asdict(quick) == dataclasses.asdict(plain)
        assert repr(quick).removeprefix("_Quick") == repr(plain).removeprefix("_Plain")
    # Each instance its own list from the factory.
    assert _Quick(name="a").tags is not _Quick(name="a").tags


def test_the_instance_stays_frozen_comparable_and_replaceable():
    quick = _Quick(name="a", count=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.count = 5  # type: ignore[misc]
    assert quick == _Quick(name="a", count=2) and quick != _Quick(name="a")
    assert dataclasses.replace(quick, count=4).count == 4
    assert dataclasses.replace(quick, kept=8).kept == 8


def test_unknown_or_missing_arguments_fail_as_the_dataclass_does():
    with pytest.raises(TypeError):
        _Quick()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _Quick(name="a", colour="red")  # type: ignore[call-arg]


def test_post_init_is_still_called():
    seen: list[str] = []

    @quick_init
    @dataclass(frozen=True, kw_only=True)
    class Checked:
        name: str

        def __post_init__(self) -> None:
            seen.append(self.name)

    Checked(name="n")
    assert seen == ["n"]


def test_a_class_with_slots_of_its_own_is_refused():
    with pytest.raises(TypeError, match="without slots"):
        quick_init(_Slotted)


def test_the_hot_types_are_built_by_it():
    for cls in (ScheduleSpec, TriggerSpec, Schedule, Execution):
        assert cls.__init__.__code__.co_filename == "<string>"
        assert "update" in cls.__init__.__code__.co_names
