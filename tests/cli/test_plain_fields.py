"""Every plain field of a spec (``PLAIN_FIELDS``: durations, counts, factors) on the command
line, from its description alone: ``add`` and ``edit`` take its option, ``show`` and ``--json``
print it (and the setting standing in while it is unset), 0 turns it off where it says so, and
a value out of range names the option and changes nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from goatbeat_celery.core.types.fields import FieldInfo
from goatbeat_celery.core.types.spec import PLAIN_FIELDS
from goatbeat_celery.store import Store

from .conftest import Cli, field_lines

#: A value of each kind, as typed, as stored in the spec, as ``--json`` prints it and as
#: ``show`` prints it.
TYPED = {"duration": ("37s", timedelta(seconds=37), 37.0, "37s"),
         "count": ("7", 7, 7, "7"),
         "factor": ("1.5", 1.5, 1.5, "1.5")}
OTHER = {"duration": ("41s", timedelta(seconds=41)), "count": ("9", 9),
         "factor": ("2.5", 2.5)}
#: What a field needs beside it to be valid (a backoff's shape needs the backoff).
NEEDS = {"failure_backoff_factor": ("--failure-backoff", "10s"),
         "failure_backoff_max": ("--failure-backoff", "10s")}
#: Lines of ``show`` that differ between any two schedules.
OWN_LINES = {"name", "created", "updated", "next run", "next occurrence", "offset"}


def _ids(field: FieldInfo) -> str:
    return field.name


@pytest.mark.parametrize("field", PLAIN_FIELDS, ids=_ids)
def test_each_plain_field_is_added_shown_and_edited(cli: Cli, store: Store,
                                                     field: FieldInfo) -> None:
    typed, stored, as_json, shown = TYPED[field.kind]
    needs = NEEDS.get(field.name, ())
    cli.ok("add", "plain", "feeds.poll", "--every", "1h", *needs)
    document = cli.json("add", "given", "feeds.poll", "--every", "1h", *needs,
                        field.option, typed)
    assert document[field.name] == as_json
    assert getattr(store.get_schedule("given").spec, field.name) == stored

    # show prints the value on a line the schedule without it does not have.
    plain = field_lines(cli.ok("show", "plain").output)
    given = field_lines(cli.ok("show", "given").output)
    changed = {label: value for label, value in given.items()
               if plain.get(label) != value and label not in OWN_LINES - {"offset"}}
    assert any(shown in value for value in changed.values()), (field.name, changed)

    other_typed, other = OTHER[field.kind]
    cli.ok("edit", "given", field.option, other_typed)
    assert getattr(store.get_schedule("given").spec, field.name) == other
    if field.off is not None:
        cli.ok("edit", "given", field.option, "0")
        assert getattr(store.get_schedule("given").spec, field.name) is None


@pytest.mark.parametrize("field", PLAIN_FIELDS, ids=_ids)
def test_a_plain_field_out_of_range_names_its_option(cli: Cli, store: Store,
                                                     field: FieldInfo) -> None:
    if field.kind == "duration":  # the duration parser refuses a negative one as text
        result = cli.fails("add", "bad", "feeds.poll", "--every", "1h", field.option, "-1",
                           exit_code=2)
        assert field.option in result.output
    else:  # a number's range is judged by the API with the other problems
        result = cli.fails("add", "bad", "feeds.poll", "--cron", "61 * * * *", field.option,
                           "-1")
        assert f"{field.option}: " in result.output and "--cron: " in result.output
    assert store.list_schedules() == []


WITH_DEFAULT = [field for field in PLAIN_FIELDS if field.default is not None]


@pytest.mark.parametrize("field", WITH_DEFAULT, ids=_ids)
def test_the_setting_standing_in_for_an_unset_field_is_shown_as_the_default(
        cli: Cli, field: FieldInfo) -> None:
    _typed, _stored, as_json, shown = TYPED[field.kind]
    setting: Any = as_json
    cli.configure(**{f"goatbeat_{field.default}": setting})
    document = cli.json("add", "poll", "feeds.poll", "--every", "1h")
    assert document[field.name] is None
    assert document[f"effective_{field.name}"] == as_json
    assert field_lines(cli.ok("show", "poll").output)[field.label] == f"default ({shown})"
    # The schedule's own value wins, and is shown as its own.
    other_typed, other = OTHER[field.kind]
    document = cli.json("edit", "poll", field.option, other_typed)
    own = other.total_seconds() if isinstance(other, timedelta) else other
    assert document[field.name] == document[f"effective_{field.name}"] == own
    assert not field_lines(cli.ok("show", "poll").output)[field.label].startswith("default")
