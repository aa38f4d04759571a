"""The runs across schedules, through HTTP on a real PostgreSQL store: the runs page and its
filters, its key-set pages, the grid of schedules by their latest runs, a run's traceback and
retries, and the links to them."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, cast
from urllib.parse import quote

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.web import WebSettings
from tests.web.conftest import Browser

TRACE = ('Traceback (most recent call last):\n  File "tasks.py", line 3, in report\n'
         '    raise ValueError("<b>boom</b>")\nValueError: <b>boom</b>')


def end(schedules: Schedules, execution: Execution, outcome: RunOutcome, *,
        worker: str = "celery@w1", error: str | None = None,
        traceback: str | None = None) -> None:
    schedules.store.mark_submitted([execution.key])
    cast(Any, schedules.store).record_runs([RunEvent.finished(
        execution.key, run=f"run-{execution.token}-{len(execution.key)}", worker=worker,
        age=timedelta(0),
        outcome=outcome, runtime=timedelta(seconds=1), error=error,
        started_age=timedelta(seconds=1), traceback=traceback)])


def keys_listed(page: str) -> list[str]:
    table = page[page.index('id="runs"'):page.index("</table>", page.index('id="runs"'))]
    return re.findall(r'href="/run\?key=[^"]+" title="([^"]+)"', table)


def populate(schedules: Schedules) -> dict[str, list[Execution]]:
    schedules.create("etl", "proj.tasks.etl", every=60, tags=["nightly"])
    schedules.create("mail", "proj.tasks.mail", every=60)
    etl = [schedules.run_now("etl") for _ in range(3)]
    mail = [schedules.run_now("mail") for _ in range(2)]
    end(schedules, etl[0], RunOutcome.SUCCEEDED)
    end(schedules, etl[1], RunOutcome.FAILED, error="ValueError: <b>boom</b>", traceback=TRACE)
    end(schedules, mail[0], RunOutcome.FAILED, worker="celery@w2", error="KeyError: 'x'")
    return {"etl": etl, "mail": mail}


def test_the_runs_page_lists_every_schedule_s_runs_newest_first_with_their_schedule(
        client: Browser, schedules: Schedules) -> None:
    runs = populate(schedules)
    page = client.get("/runs").text
    listed = keys_listed(page)
    assert sorted(listed) == sorted(e.key for group in runs.values() for e in group)
    assert listed == [e.key for e in schedules.store.find_runs(_query())]
    assert 'href="/schedule?name=mail" class="schedule-name"' in page
    assert "<th>schedule and run</th>" in page
    assert "ValueError:<wbr> &lt;b&gt;boom" in page and "<b>boom" not in page


def _query(**criteria: Any) -> Any:
    from goatbeat_celery.core.types.run_query import RunQuery
    return RunQuery(**criteria)


def test_each_filter_narrows_the_runs(client: Browser, schedules: Schedules) -> None:
    runs = populate(schedules)
    failed = keys_listed(client.get("/runs", params={"outcome": "failed"}).text)
    assert sorted(failed) == sorted([runs["etl"][1].key, runs["mail"][0].key])
    assert keys_listed(client.get("/runs", params={"outcome": "failed",
                                                   "worker": "celery@w2"}).text) == [
        runs["mail"][0].key]
    assert sorted(keys_listed(client.get("/runs", params={"tag": "nightly"}).text)) == sorted(
        e.key for e in runs["etl"])
    assert sorted(keys_listed(client.get("/runs", params={"schedule": "mail"}).text)) == sorted(
        e.key for e in runs["mail"])
    assert keys_listed(client.get("/runs", params={"q": "KEYERROR"}).text) == [
        runs["mail"][0].key]
    assert len(keys_listed(client.get("/runs", params={"range": "1h"}).text)) == 5
    future = client.get("/runs", params={"since": "2999-01-01T00:00"}).text
    assert 'id="no-runs"' in future and "No runs match" in future


def test_a_bad_instant_is_said_and_ignored_and_an_unknown_outcome_ignored(
        client: Browser, schedules: Schedules) -> None:
    populate(schedules)
    page = client.get("/runs", params={"since": "<yesterday>", "outcome": "fine"})
    assert page.status_code == 200
    assert "&#39;&lt;yesterday&gt;&#39; is not an ISO-8601 instant, ignored" in page.text
    assert len(keys_listed(page.text)) == 5


def test_pages_follow_one_another_by_key_set(client: Browser, schedules: Schedules,
                                             monkeypatch: Any) -> None:
    from goatbeat_celery.web.pages import run_search

    monkeypatch.setattr(run_search, "PAGE_SIZE", 2)
    runs = populate(schedules)
    seen: list[str] = []
    path: str | None = "/runs?outcome=&schedule="
    while path is not None:
        page = client.get(path).text
        seen.extend(keys_listed(page) if 'id="runs"' in page else [])
        found = re.search(r'<a href="([^"]+)" rel="next">', page)
        path = None if found is None else found.group(1).replace("&amp;", "&")
    assert sorted(seen) == sorted(e.key for group in runs.values() for e in group)
    assert len(seen) == len(set(seen)) == 5


def test_the_grid_shows_each_schedule_s_latest_runs_as_cells_linking_to_them(
        client: Browser, schedules: Schedules) -> None:
    runs = populate(schedules)
    schedules.create("idle", "proj.tasks.idle", every=60)
    page = client.get("/runs/grid").text
    cells = re.findall(r'<a class="cell (\w+)" href="/run\?key=([^"]+)"', page)
    assert len(cells) == 5
    tones = {key: tone for tone, key in cells}
    assert tones[quote(runs["etl"][1].key, safe="")] == "bad"
    assert tones[quote(runs["etl"][0].key, safe="")] == "good"
    assert "no runs" in page  # idle
    tagged = client.get("/runs/grid", params={"tag": "nightly"}).text
    assert len(re.findall(r'class="cell ', tagged)) == 3


def test_a_run_page_shows_the_worker_s_traceback_escaped_and_its_attempts(
        client: Browser, schedules: Schedules) -> None:
    runs = populate(schedules)
    page = client.get("/run", params={"key": runs["etl"][1].key}).text
    shown = re.search(r'<pre class="traceback" id="run-traceback">(.*?)</pre>', page, re.S)
    assert shown is not None
    assert shown.group(1) == TRACE.replace("<", "&lt;").replace(">", "&gt;").replace(
        '"', "&#34;")
    assert "1 (no retry)" in page
    plain = client.get("/run", params={"key": runs["mail"][0].key}).text
    assert 'id="no-traceback"' in plain and 'id="run-traceback"' not in plain


def test_the_overview_the_navigation_and_a_schedule_link_to_the_runs(
        client: Browser, schedules: Schedules) -> None:
    populate(schedules)
    overview = client.get("/").text
    assert 'href="/runs?outcome=failed&amp;range=24h"' in overview
    assert 'href="/runs/grid"' in overview and '<a href="/runs">Runs</a>' in overview
    schedule = client.get("/schedule", params={"name": "etl", "outcome": "failed"}).text
    assert 'href="/runs?schedule=etl&amp;outcome=failed" id="all-runs"' in schedule


def test_a_read_only_dashboard_shows_the_runs_and_the_grid(make_client: Any,
                                                          schedules: Schedules) -> None:
    populate(schedules)
    viewer: Browser = make_client(WebSettings(read_only=True))
    assert viewer.get("/runs").status_code == 200
    assert viewer.get("/runs/grid").status_code == 200


def test_a_text_no_index_finds_quickly_is_looked_for_a_bounded_read_at_a_time(
        client: Browser, schedules: Schedules, monkeypatch: Any) -> None:
    from goatbeat_celery.api import records

    monkeypatch.setattr(records, "TEXT_SCAN", 2)
    # As a store without the trigram indexes (or one whose index the text defeats) answers.
    monkeypatch.setattr(schedules.store, "text_search_indexed", lambda: False)
    runs = populate(schedules)
    seen: list[str] = []
    hints: list[str] = []
    path: str | None = "/runs?q=etl"
    while path is not None:
        page = client.get(path).text
        seen.extend(keys_listed(page) if 'id="runs"' in page else [])
        hint = re.search(r'<p class="hint" id="scan-stopped">(.*?)</p>', page, re.S)
        found = re.search(r'<a href="([^"]+)" rel="next">([^<]+)</a>', page)
        if hint is not None:
            hints.append(hint.group(1))
            assert found is not None and found.group(2) == "Look further back »"
        path = None if found is None else found.group(1).replace("&amp;", "&")
    # Five runs two at a time: two reads stopped short, the third read the last run.
    assert sorted(seen) == sorted(e.key for e in runs["etl"]) and len(seen) == 3
    assert len(hints) == 2
    # The first read found none: the page says so of what it read, not of every run.
    first = client.get("/runs?q=etl").text
    assert "None of the runs read holds it." in first and "No runs match" not in first
    assert "“etl” cannot be looked up in an index quickly" in hints[0]
    assert "the next 2 runs the other filters allow" in hints[0]
