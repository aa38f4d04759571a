"""A backfill's outcomes and the re-run of its failed occurrences, and the revert of a recorded
edit, on the dashboard and over the HTTP API (through an HTTP client, on the session's
PostgreSQL database): counts shown, the button only where it can act and never read-only,
refusals on the page with their reason, CSRF and scopes as for every change."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.runs import RunOutcome
from goatbeat_celery.core.types.audit import AuditAction
from goatbeat_celery.core.types.execution import ExecutionState
from goatbeat_celery.web import WebSettings, create_app
from tests.support.backfills import drained_backfill

from .api_client import Api
from .conftest import Browser

S, F = RunOutcome.SUCCEEDED, RunOutcome.FAILED


def polled(schedules: Schedules) -> int:
    schedules.create("poll", "proj.tasks.poll", every=60)
    backfill, _ = drained_backfill(schedules.store, "poll", [S, F, F, None])
    return backfill.id


def test_the_backfill_page_counts_its_runs_and_reruns_the_failed(
        client: Browser, schedules: Schedules) -> None:
    backfill_id = polled(schedules)
    html = client.get("/backfill", params={"id": backfill_id}).text
    assert 'id="outcome-counts"' in html
    for shown in ("succeeded 1", "failed 2", "submitted 1", "Re-run the 2 failed",
                  f":backfill-{backfill_id}-rerun-1"):
        assert shown in html, shown
    taken = client.submit("/backfill/rerun", id=str(backfill_id))
    assert taken.status_code == 303
    assert taken.headers["location"].endswith(f"/backfill?id={backfill_id}&notice=rerun")
    after = client.get(taken.headers["location"]).text
    assert "Failed occurrences queued again under new keys" in after
    assert 'id="reruns"' in after and "claimed 2" in after
    assert "Re-run the" not in after  # each failed one is under way again
    entry = schedules.audit("poll", limit=1)[0]
    assert (entry.action, entry.actor) == (AuditAction.RERUN, "dashboard")
    refused = client.submit("/backfill/rerun", id=str(backfill_id))
    assert refused.status_code == 409
    assert "nothing to re-run" in refused.text


def test_a_rerun_needs_the_csrf_token_and_a_writable_dashboard(
        client: Browser, make_client: Any, schedules: Schedules) -> None:
    backfill_id = polled(schedules)
    forged = client.post("/backfill/rerun", data={"id": str(backfill_id)},
                         follow_redirects=False)
    assert forged.status_code == 403
    viewer: Browser = make_client(WebSettings(read_only=True))
    html = viewer.get("/backfill", params={"id": backfill_id}).text
    assert "failed 2" in html and 'id="rerun-failed"' not in html
    assert viewer.submit("/backfill/rerun", id=str(backfill_id)).status_code == 403
    assert schedules.backfill_outcomes(backfill_id).reruns == ()


def edited(schedules: Schedules) -> int:
    schedules.create("tick", "proj.tasks.tick", every=60, description="every minute")
    schedules.update("tick", every=300, description="<b>five</b> minutes")
    return schedules.audit("tick", limit=1)[0].id


def test_an_edit_is_reverted_after_its_confirmation(client: Browser,
                                                    schedules: Schedules) -> None:
    entry = edited(schedules)
    page = client.get("/schedule", params={"name": "tick"}).text
    assert f'href="/audit/revert?id={entry}"' in page
    assert page.count("Revert…") == 1  # the edit only, not the creation
    assert ("description:<wbr> every minute → &lt;b&gt;five&lt;/<wbr>b&gt; minutes"
            in page)  # before → after, escaped
    confirm = client.get("/audit/revert", params={"id": entry}).text
    assert 'id="revert-fields"' in confirm and "&lt;b&gt;five&lt;/<wbr>b&gt;" in confirm
    # A post without the confirmation's field only asks for it.
    unconfirmed = client.submit("/audit/revert", id=str(entry))
    assert unconfirmed.status_code == 303
    assert unconfirmed.headers["location"].endswith(f"/audit/revert?id={entry}")
    assert schedules.get("tick").spec.description == "<b>five</b> minutes"
    done = client.submit("/audit/revert", id=str(entry), confirm="revert", reason="too slow")
    assert done.status_code == 303
    assert done.headers["location"].endswith("/schedule?name=tick&notice=reverted")
    spec = schedules.get("tick").spec
    assert (spec.trigger.params["every"], spec.description) == (60, "every minute")
    newest = schedules.audit("tick", limit=1)[0]
    assert (newest.action, newest.reason, newest.changes["reverts"]) == (
        AuditAction.REVERT, "too slow", (None, entry))
    shown = client.get("/schedule", params={"name": "tick"}).text
    assert f"reverted by #{newest.id}" in shown and "Revert…" not in shown
    again = client.submit("/audit/revert", id=str(entry), confirm="revert")
    assert again.status_code == 409
    assert "changed since" in again.text and 'id="confirm"' not in again.text


def test_what_is_not_an_edit_is_refused_on_its_page(client: Browser, make_client: Any,
                                                    schedules: Schedules) -> None:
    entry = edited(schedules)
    created = schedules.audit("tick", limit=2)[1].id
    page = client.get("/audit/revert", params={"id": created})
    assert page.status_code == 200
    assert "is a create, not an edit" in page.text and 'id="confirm"' not in page.text
    assert client.submit("/audit/revert", id=str(created),
                         confirm="revert").status_code == 422
    assert client.get("/audit/revert", params={"id": "999999"}).status_code == 404
    forged = client.post("/audit/revert", data={"id": str(entry), "confirm": "revert"},
                         follow_redirects=False)
    assert forged.status_code == 403
    viewer: Browser = make_client(WebSettings(read_only=True))
    assert "Revert…" not in viewer.get("/schedule", params={"name": "tick"}).text
    assert 'method="post"' not in viewer.get("/audit/revert", params={"id": entry}).text
    assert viewer.submit("/audit/revert", id=str(entry), confirm="revert").status_code == 403
    assert schedules.get("tick").spec.trigger.params["every"] == 300


@pytest.fixture
def api(schedules: Schedules) -> Iterator[Api]:
    with TestClient(create_app(schedules), base_url="http://127.0.0.1") as http:
        yield Api(http, schedules)


def test_the_api_gives_outcomes_reruns_the_failed_and_reverts_an_edit(
        api: Api, schedules: Schedules) -> None:
    backfill_id = polled(schedules)
    auth, reader = api.token(), api.token("viewer", scopes="read")
    shown = api.client.get(f"/api/v1/backfills/{backfill_id}", headers=reader).json()
    assert shown["outcomes"]["runs"] == {"succeeded": 1, "failed": 2, "submitted": 1}
    assert len(shown["outcomes"]["failed"]) == 2
    path = f"/api/v1/backfills/{backfill_id}/rerun-failed"
    assert api.client.post(path, headers=reader).status_code == 403
    made = api.client.post(path, headers={**auth, "X-Goatbeat-Reason": "db back"})
    assert made.status_code == 201, made.text
    assert made.json()["round"] == 1 and len(made.json()["runs"]) == 2
    for run in made.json()["runs"]:
        assert schedules.store.executions_by_key([run["key"]])[run["key"]].state is (
            ExecutionState.CLAIMED)
    again = api.client.post(path, headers=auth)
    assert again.status_code == 409
    assert "nothing to re-run" in again.json()["detail"]

    entry = edited(schedules)
    revert = f"/api/v1/audit/{entry}/revert"
    assert api.client.post(revert, headers=reader).status_code == 403
    reverted = api.client.post(revert, headers=auth)
    assert reverted.status_code == 200, reverted.text
    assert reverted.json()["trigger"]["every"] == 60
    conflict = api.client.post(revert, headers=auth)
    assert conflict.status_code == 409 and "changed since" in conflict.json()["detail"]
    created = schedules.audit("tick", limit=10)[-1].id
    invalid = api.client.post(f"/api/v1/audit/{created}/revert", headers=auth)
    assert invalid.status_code == 422
    assert invalid.json()["problems"][0]["message"].endswith("is a create, not an edit")
    assert api.client.post("/api/v1/audit/999999/revert", headers=auth).status_code == 404
    outside = api.token("other", prefix="other.")
    assert api.client.post(revert, headers=outside).status_code == 404
