"""Every plain field of a spec (``PLAIN_FIELDS``: durations, counts, factors) in the
dashboard's schedule form, from its description alone: shown in its group's fieldset with its
label and what empty means, set by typing, read back on the schedule page and in the edit form
(which saves unchanged to nothing new), unset by emptying it; unreadable or refused text is
shown under the field, naming it, and changes nothing."""

from __future__ import annotations

import html as html_module
import re
from datetime import timedelta
from typing import Any

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.fields import FieldInfo
from goatbeat_celery.core.types.spec import PLAIN_FIELDS
from tests.web.conftest import Browser
from tests.web.pages import error_of

#: A value of each kind: as typed, as stored in the spec, as the edit form shows it and as the
#: schedule page shows it.
TYPED = {"duration": ("37s", timedelta(seconds=37), "37", "37s"),
         "count": ("7", 7, "7", "7"),
         "factor": ("1.5", 1.5, "1.5", "1.5")}
#: Text each kind cannot be read from.
UNREADABLE = {"duration": "soon", "count": "many", "factor": "fast"}
#: What a field needs beside it to be valid (a backoff's shape needs the backoff).
NEEDS: dict[str, dict[str, Any]] = {"failure_backoff_factor": {"failure_backoff": 10},
                                    "failure_backoff_max": {"failure_backoff": 10}}
#: Fields a schedule cannot have both of: a creation gives all but one of them.
EXCLUSIVE = {"offset", "jitter"}
_INPUT = re.compile(r'<input id="(\w+)" name="\w+" type="text" value="([^"]*)"')
_PAIR = re.compile(r"<dt>([^<]*)</dt>\s*<dd[^>]*>(.*?)</dd>", re.S)


def _ids(field: FieldInfo) -> str:
    return field.name


def shown_inputs(html: str) -> dict[str, str]:
    return {name: html_module.unescape(value) for name, value in _INPUT.findall(html)}


def spec_card(html: str) -> dict[str, str]:
    card = html[html.index('id="spec"'):html.index("</dl>", html.index('id="spec"'))]
    return {label: html_module.unescape(re.sub(r"<[^>]+>", " ", value))
            for label, value in _PAIR.findall(card)}


def schedule_page(client: Browser, name: str) -> str:
    response = client.get("/schedule", params={"name": name})
    assert response.status_code == 200
    return str(response.text)


@pytest.mark.parametrize("field", PLAIN_FIELDS, ids=_ids)
def test_each_plain_field_is_set_read_back_and_unset_through_the_form(
        client: Browser, schedules: Schedules, field: FieldInfo) -> None:
    typed, stored, in_form, on_page = TYPED[field.kind]
    needs = NEEDS.get(field.name, {})
    schedules.create("plain", "proj.tasks.tick", every=3600, **needs)
    schedules.create("given", "proj.tasks.tick", every=3600, **needs)

    response = client.submit("/schedule/edit", name="given", **{field.name: typed})

    assert response.status_code == 303, response.text
    assert getattr(schedules.get("given").spec, field.name) == stored
    page = schedule_page(client, "given")
    assert shown_inputs(page)[field.name] == in_form
    # The spec card shows the value on a line the schedule without it does not have.
    plain, given = spec_card(schedule_page(client, "plain")), spec_card(page)
    changed = {label: value for label, value in given.items() if plain.get(label) != value}
    assert any(on_page in value for value in changed.values()), (field.name, changed)

    # The form as the page fills it, sent back unchanged: nothing changes.
    version = schedules.get("given").version
    selects = {"mode": "fixed_rate", "overlap": "", "misfire_policy": ""}
    assert client.submit("/schedule/edit", name="given", kind="every",
                         **selects, **shown_inputs(page)).status_code == 303
    assert schedules.get("given").version == version

    assert client.submit("/schedule/edit", name="given",
                         **{field.name: ""}).status_code == 303
    assert getattr(schedules.get("given").spec, field.name) is None
    assert shown_inputs(schedule_page(client, "given"))[field.name] == ""


@pytest.mark.parametrize("left_out", sorted(EXCLUSIVE))
def test_the_plain_fields_are_given_when_creating(client: Browser, schedules: Schedules,
                                                  left_out: str) -> None:
    given = [field for field in PLAIN_FIELDS if field.name != left_out]
    response = client.submit("/new", name="fresh", task="proj.tasks.tick", kind="every",
                             every="1h", **{field.name: TYPED[field.kind][0] for field in given})
    assert response.status_code == 303, response.text
    spec = schedules.get("fresh").spec
    assert {field.name: getattr(spec, field.name) for field in PLAIN_FIELDS} == {
        field.name: None if field.name == left_out else TYPED[field.kind][1]
        for field in PLAIN_FIELDS}


@pytest.mark.parametrize("field", PLAIN_FIELDS, ids=_ids)
def test_each_plain_field_is_in_its_groups_fieldset_with_what_empty_means(
        client: Browser, schedules: Schedules, field: FieldInfo) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    settings = schedules.config.settings
    for html in (client.get("/new").text, schedule_page(client, "tick")):
        start = html.index(f'<fieldset class="group" id="{field.group}">')
        fieldset = html[start:html.index("</fieldset>", start)]
        found = re.search(rf'<label for="{field.name}">([^<]*)</label>.*?'
                          r'<p class="hint">([^<]*)</p>', fieldset, re.S)
        assert found, f"{field.name} is not in the {field.group} fieldset"
        label, hint = found.group(1), html_module.unescape(found.group(2))
        assert label.lower() == field.label
        assert field.help[1:].rstrip(".") in hint
        if field.default is None:
            assert hint.endswith(f"empty for {field.unset or 'none'}")
        else:
            assert "empty for the global setting (" in hint, hint
            if getattr(settings, field.default) is None:
                assert hint.endswith("(none)")


@pytest.mark.parametrize("field", PLAIN_FIELDS, ids=_ids)
def test_an_unreadable_plain_field_names_itself_and_changes_nothing(
        client: Browser, schedules: Schedules, field: FieldInfo) -> None:
    schedules.create("tick", "proj.tasks.tick", every=3600, **NEEDS.get(field.name, {}))
    before = schedules.get("tick")
    text = UNREADABLE[field.kind]

    response = client.submit("/schedule/edit", name="tick", **{field.name: text})

    assert response.status_code == 422
    problem = error_of(response.text, field.name)
    assert field.name in problem and repr(text) in problem and "give" in problem, problem
    assert shown_inputs(response.text)[field.name] == text  # what was typed stays
    assert schedules.get("tick") == before
    response = client.submit("/new", name="fresh", task="proj.tasks.tick", kind="every",
                             every="1h", **{field.name: text})
    assert response.status_code == 422 and field.name in error_of(response.text, field.name)
    assert [s.name for s in schedules.list()] == ["tick"]


@pytest.mark.parametrize("field", PLAIN_FIELDS, ids=_ids)
def test_a_negative_plain_field_is_refused_under_it_and_changes_nothing(
        client: Browser, schedules: Schedules, field: FieldInfo) -> None:
    schedules.create("tick", "proj.tasks.tick", every=3600, **NEEDS.get(field.name, {}))
    before = schedules.get("tick")

    response = client.submit("/schedule/edit", name="tick", **{field.name: "-1"})

    assert response.status_code == 422
    assert field.name in error_of(response.text, field.name)
    assert schedules.get("tick") == before
