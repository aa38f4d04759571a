"""The dashboard shows the open alerts on its overview and each schedule's alerts on its page,
escaped, rendered through HTTP on a real PostgreSQL store."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.alerts import AlertChange, AlertRule
from goatbeat_celery.store import Store
from tests.web.conftest import Browser


def raise_alert(schedules: Schedules, name: str, rule: AlertRule, reason: str) -> None:
    store = cast(Store, schedules.store)
    grant = store.acquire("default", "replica-a", timedelta(seconds=60))
    assert grant is not None
    store.record_alerts([AlertChange(
        schedule_name=name, rule=rule, action="open", reason=reason, key=f"{name}:1")],
        lease=grant)


def test_the_overview_lists_the_open_alerts_and_the_schedule_page_its_own(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("report", "proj.tasks.report", every=60)
    schedules.create("quiet", "proj.tasks.tick", every=60)
    assert "None open." in client.get("/").text
    raise_alert(schedules, "report", AlertRule.FAILED, "3 runs failed in a row <script>")

    html = client.get("/").text
    table = html[html.index('id="alerts"'):]
    table = table[:table.index("</table>")]
    assert "report" in table and "failed" in table
    assert "3 runs failed in a row &lt;script&gt;" in table

    page = client.get("/schedule?name=report").text
    rows = page[page.index('id="alert-rows"'):]
    assert "failed" in rows[:rows.index("</table>")]
    quiet = client.get("/schedule?name=quiet").text
    assert 'id="alert-rows"' not in quiet
