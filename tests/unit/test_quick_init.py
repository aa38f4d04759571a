"""quick_init: the faster __init__ keeps every behaviour of the dataclass's own; quick_new
builds the same instance from a dict of its fields."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest

from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.quick import quick_init, quick_new
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from tests.support.fields import only_fields


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


def test_post_init_is_still_called_by_init_and_by_quick_new():
    seen: list[str] = []

    @quick_init
    @dataclass(frozen=True, kw_only=True)
    class Checked:
        name: str

        def __post_init__(self) -> None:
            seen.append(self.name)

    Checked(name="n")
    quick_new(Checked, {"name": "q"})
    assert seen == ["n", "q"]


def test_a_class_with_slots_of_its_own_is_refused():
    with pytest.raises(TypeError, match="without slots"):
        quick_init(_Slotted)


def test_the_hot_types_are_built_by_it():
    for cls in (ScheduleSpec, TriggerSpec, Schedule, Execution):
        assert cls.__init__.__code__.co_filename == "<string>"
        assert "update" in cls.__init__.__code__.co_names


@quick_init
@dataclass(frozen=True, kw_only=True)
class _Own:
    name: str
    count: int = 3
    tags: list[str] = field(default_factory=list)


@quick_init
@dataclass(frozen=True, kw_only=True)
class _Hashed:
    name: str
    count: int = 3


def test_quick_new_builds_what_init_builds():
    for given in ({"name": "a"}, {"name": "b", "count": 7, "tags": ["x"]}):
        built, made = quick_new(_Own, dict(given)), _Own(**given)  # type: ignore[arg-type]
        assert built == made and repr(built) == repr(made)
        assert dataclasses.asdict(built) == dataclasses.asdict(made)
        assert pickle.loads(pickle.dumps(built)) == made
        assert dataclasses.replace(built, count=1) == dataclasses.replace(made, count=1)
        only_fields(built)
    # Hashed by its fields, as the dataclass hashes them.
    assert hash(quick_new(_Hashed, {"name": "a"})) == hash(_Hashed(name="a", count=3))
    # A default left out is read from the class; a factory's value is each instance's own.
    assert quick_new(_Own, {"name": "a"}).count == 3
    assert quick_new(_Own, {"name": "a"}).tags is not quick_new(_Own, {"name": "a"}).tags
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick_new(_Own, {"name": "a"}).count = 4  # type: ignore[misc]


def test_quick_new_refuses_a_missing_field_and_a_slotted_class():
    with pytest.raises(TypeError, match="no value for name"):
        quick_new(_Own, {"count": 1})
    with pytest.raises(TypeError, match="quick_init"):
        quick_new(_Quick, {"name": "a"})  # its base keeps a field in slots
