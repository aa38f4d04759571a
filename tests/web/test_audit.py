"""The dashboard's changes are in the audit log as made by ``dashboard``, with the reason its
forms take, and the schedule's page shows the log, escaped."""

from __future__ import annotations

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.audit import AuditAction
from tests.web.conftest import Browser


def test_changes_made_here_are_recorded_as_the_dashboards_and_shown(
        client: Browser, schedules: Schedules) -> None:
    schedules.acting_as("token:<ci>").create("tick", "proj.tasks.tick", every=60,
                                              reason="first <b>run</b>")
    version = schedules.get("tick").version
    saved = client.submit("/schedule/edit", name="tick", kind="every", every="120",
                          version=str(version), reason="too often")
    assert saved.status_code == 303, saved.text
    assert client.submit("/schedule/pause", name="tick").status_code == 303

    paused, edited, created = schedules.audit("tick")
    assert (edited.action, edited.actor, edited.reason) == (AuditAction.EDIT, "dashboard",
                                                            "too often")
    assert edited.changes == {"trigger": ({"kind": "interval", "every": 60.0},
                                          {"kind": "interval", "every": 120.0})}
    assert (paused.action, paused.actor) == (AuditAction.PAUSE, "dashboard")
    assert created.actor == "token:<ci>"

    page = client.get("/schedule", params={"name": "tick"}).text
    section = page.split('id="audit-log"')[1].split("</table>")[0]
    assert section.count("<tr") == 4  # the header and three entries, newest first
    assert section.index("pause") < section.index("edit") < section.index("create")
    assert "too often" in section and "dashboard" in section
    assert "token:&lt;ci&gt;" in section and "first &lt;b&gt;run&lt;/b&gt;" in section


def test_a_removal_keeps_its_reason(client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    confirm = client.get("/schedule/delete", params={"name": "tick"}).text
    assert 'name="reason"' in confirm

    removed = client.submit("/schedule/delete", name="tick", confirm="remove",
                            reason="replaced by tock")
    assert removed.status_code == 303
    deleted = schedules.audit("tick")[0]
    assert (deleted.action, deleted.actor, deleted.reason) == (
        AuditAction.DELETE, "dashboard", "replaced by tock")
