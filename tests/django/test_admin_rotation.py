"""Rotation across clusters in the admin, through Django's test client logged in as a
superuser: the change form sets and clears a rotation through the Schedules API, and names a
bad one on its field."""

from __future__ import annotations

from typing import Any

from goatbeat_celery.api import Schedules

from .admin_pages import ADD, change_url, form_data


def test_a_rotation_is_added_shown_and_removed_through_the_api(client: Any,
                                                               api: Schedules) -> None:
    response = client.post(ADD, form_data(rotate="eu, us", rotate_handover="on"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    spec = api.get("poll").spec
    assert (spec.rotate, spec.rotate_handover) == (("eu", "us"), True)

    page = client.get(change_url("poll")).content.decode()
    assert 'value="eu, us"' in page and 'name="rotate_handover"' in page

    version = api.get("poll").version
    response = client.post(change_url("poll"), form_data(rotate="", version=str(version)))
    assert response.status_code == 302, response.context["adminform"].form.errors
    spec = api.get("poll").spec
    assert (spec.rotate, spec.rotate_handover) == ((), False)


def test_a_bad_rotation_is_named_on_its_field_and_nothing_is_stored(client: Any,
                                                                    api: Schedules) -> None:
    response = client.post(ADD, form_data(rotate="eu", queue="feeds"))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "name at least two queues" in " ".join(errors.get("rotate", [])), errors
    assert "conflicts with rotate" in " ".join(errors.get("queue", [])), errors
    assert not api.list()
