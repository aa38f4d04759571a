"""Runs across schedules: every store finds the same runs for each criterion, newest first,
paged by key set; the latest runs of each schedule; and a run's traceback, recorded with its
error and read with the run alone."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from goatbeat_celery.core.rules.runs import RunEvent, RunOutcome
from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.execution import Execution
from goatbeat_celery.core.types.run_query import RunCursor, RunQuery

from .conftest import Backend, Store
from .support import LONG_TTL, create_due, interval_spec

A, B = "celery@a", "celery@b"
TRACE = "Traceback (most recent call last):\n  File \"t.py\", line 1\nValueError: bad 50%_off"


def _claim(store: Store, name: str, count: int, *, tags: tuple[str, ...] = (),
           steps_back: int = 0) -> list[str]:
    """Claim ``count`` minutely occurrences of a new schedule ``name``, the last
    ``steps_back`` minutes before the store's latest grid point; returns their keys."""
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    schedule = create_due(store, name, steps_back=count - 1 + steps_back, tags=tags)
    first = schedule.next_occurrence_at
    assert first is not None
    points = [first + timedelta(minutes=i) for i in range(count)]
    following = points[-1] + timedelta(minutes=1)
    result = store.claim([PlannedClaim(
        schedule_name=name, version=schedule.row_version,
        occurrences=tuple((p, p) for p in points), missed=0,
        next_occurrence_at=following, next_run_at=following,
    )], lease=grant)
    return [d.key for d in result.dispatches]


def _end(key: str, run: str, worker: str, outcome: RunOutcome, error: str | None = None,
         traceback: str | None = None) -> RunEvent:
    return RunEvent.finished(key, run=run, worker=worker, age=timedelta(0), outcome=outcome,
                             runtime=timedelta(seconds=1), error=error,
                             started_age=timedelta(seconds=1), traceback=traceback)


@pytest.fixture
def runs(store: Store) -> dict[str, list[str]]:
    """Two schedules of four runs each at the same instants (so that keys break ties): ``etl``
    (tagged ``nightly``) ran on A, two succeeded and one failed with a traceback; ``mail`` on
    B, one failed and one succeeded; the last run of each is claimed, the one before sent."""
    etl = _claim(store, "etl", 4, tags=("nightly",))
    mail = _claim(store, "mail", 4)
    store.mark_submitted(etl[:3] + mail[:3])
    assert store.record_runs([
        _end(etl[0], "r1", A, RunOutcome.SUCCEEDED),
        _end(etl[1], "r2", A, RunOutcome.FAILED, "ValueError: bad 50%_off", TRACE),
        _end(mail[0], "r3", B, RunOutcome.FAILED, "KeyError: 'MISSING'"),
        _end(mail[1], "r4", B, RunOutcome.SUCCEEDED),
    ]) == 0
    return {"etl": etl, "mail": mail}


def keys(found: list[Execution]) -> list[str]:
    return [e.key for e in found]


def newest_first(*groups: list[str]) -> list[str]:
    return sorted((key for group in groups for key in group), reverse=True)


def test_every_run_newest_first_then_by_key(store: Store, runs: dict[str, list[str]]) -> None:
    found = store.find_runs(RunQuery())
    assert keys(found) == sorted(keys(found), key=lambda k: (
        next(e.occurrence_at for e in found if e.key == k), k), reverse=True)
    assert sorted(keys(found)) == sorted(runs["etl"] + runs["mail"])


def test_pages_by_key_set_cover_every_run_once(store: Store, runs: dict[str, list[str]]) -> None:
    everything = keys(store.find_runs(RunQuery(), limit=100))
    seen: list[str] = []
    cursor: RunCursor | None = None
    while True:
        page = store.find_runs(RunQuery(), before=cursor, limit=3)
        if not page:
            break
        seen.extend(keys(page))
        cursor = RunCursor(page[-1].occurrence_at, page[-1].key)
    assert seen == everything and len(seen) == 8


def test_a_page_is_not_shifted_by_runs_written_since(store: Store,
                                                     runs: dict[str, list[str]]) -> None:
    first = store.find_runs(RunQuery(), limit=2)
    following = store.find_runs(RunQuery(), before=RunCursor(first[-1].occurrence_at,
                                                             first[-1].key), limit=2)
    # Runs of a schedule written since, older than the first page's: they come in the pages
    # after it, never in one already given.
    _claim(store, "aaa", 2, steps_back=10)
    again = store.find_runs(RunQuery(), before=RunCursor(first[-1].occurrence_at,
                                                         first[-1].key), limit=2)
    assert keys(again) == keys(following)


@pytest.mark.parametrize(("outcomes", "expected"), [
    ({"failed"}, lambda r: [r["etl"][1], r["mail"][0]]),
    ({"succeeded"}, lambda r: [r["etl"][0], r["mail"][1]]),
    ({"submitted"}, lambda r: [r["etl"][2], r["mail"][2]]),
    ({"claimed"}, lambda r: [r["etl"][3], r["mail"][3]]),
    ({"failed", "claimed"}, lambda r: [r["etl"][1], r["mail"][0], r["etl"][3], r["mail"][3]]),
    ({"lost"}, lambda r: []),
])
def test_outcomes_are_as_a_run_shows_them(store: Store, runs: dict[str, list[str]],
                                          outcomes: set[str], expected: object) -> None:
    found = store.find_runs(RunQuery(outcomes=frozenset(outcomes)))
    assert sorted(keys(found)) == sorted(expected(runs))  # type: ignore[operator]


def test_by_schedule_tag_and_worker(store: Store, runs: dict[str, list[str]]) -> None:
    assert keys(store.find_runs(RunQuery(schedule_name="mail"))) == newest_first(runs["mail"])
    assert keys(store.find_runs(RunQuery(tag="nightly"))) == newest_first(runs["etl"])
    assert keys(store.find_runs(RunQuery(tag="absent"))) == []
    assert keys(store.find_runs(RunQuery(worker=B))) == newest_first(runs["mail"][:2])
    assert keys(store.find_runs(RunQuery(worker=B, outcomes=frozenset({"failed"})))) == [
        runs["mail"][0]]


def test_by_time_range_since_included_until_excluded(store: Store,
                                                     runs: dict[str, list[str]]) -> None:
    (second,) = store.find_runs(RunQuery(schedule_name="etl"), limit=100)[2:3]
    at: datetime = second.occurrence_at
    found = store.find_runs(RunQuery(since=at, until=at + timedelta(minutes=1)))
    assert sorted(keys(found)) == sorted([runs["etl"][1], runs["mail"][1]])


def test_by_text_in_the_key_or_the_error_case_aside_wildcards_literal(
        store: Store, runs: dict[str, list[str]]) -> None:
    assert keys(store.find_runs(RunQuery(text="missing"))) == [runs["mail"][0]]
    assert keys(store.find_runs(RunQuery(text="50%_OFF"))) == [runs["etl"][1]]
    assert keys(store.find_runs(RunQuery(text="5_%"))) == []
    assert keys(store.find_runs(RunQuery(text="ETL:"))) == newest_first(runs["etl"])


def test_an_unknown_outcome_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown outcome 'fine'"):
        RunQuery(outcomes=frozenset({"fine"}))


def test_the_latest_runs_of_each_schedule(store: Store, runs: dict[str, list[str]]) -> None:
    latest = store.latest_runs(["mail", "etl", "none"], 3)
    assert {name: keys(found) for name, found in latest.items()} == {
        "etl": newest_first(runs["etl"])[:3], "mail": newest_first(runs["mail"])[:3]}
    assert store.latest_runs([], 3) == {}


def test_a_traceback_is_read_with_its_run_and_never_listed(store: Store,
                                                           runs: dict[str, list[str]]) -> None:
    key = runs["etl"][1]
    run = store.executions_by_key([key])[key]
    assert (run.run_error, run.run_traceback) == ("ValueError: bad 50%_off", TRACE)
    assert all(e.run_traceback is None for e in store.find_runs(RunQuery()))
    assert all(e.run_traceback is None
               for found in store.latest_runs(["etl"], 5).values() for e in found)


def test_a_new_attempt_clears_the_traceback_of_the_one_before(store: Store) -> None:
    (key,) = _claim(store, "job", 1)
    store.mark_submitted([key])
    store.record_runs([RunEvent.retried(key, run="r1", worker=A, age=timedelta(0),
                                        error="OSError: down", traceback=TRACE,
                                        started_age=timedelta(seconds=1))])
    assert store.executions_by_key([key])[key].run_traceback == TRACE
    store.record_runs([RunEvent.started(key, run="r2", worker=A, age=timedelta(0))])
    run = store.executions_by_key([key])[key]
    assert (run.run_error, run.run_traceback) == (None, None)


def test_a_schedule_spec_with_tags_is_what_the_tag_filter_reads(store: Store) -> None:
    store.create_schedule(interval_spec("bare"), next_occurrence_at=None, next_run_at=None)
    assert store.find_runs(RunQuery(tag="nightly")) == []


def _scan_all(store: Store, query: RunQuery, scan: int, limit: int = 50
              ) -> tuple[list[str], list[RunCursor | None]]:
    """Every key ``scan_runs`` finds, read on from each ``stopped_at`` (or each full page's
    last run) until neither is left, and the ``stopped_at`` of each read."""
    found: list[str] = []
    stops: list[RunCursor | None] = []
    before: RunCursor | None = None
    while True:
        runs, stopped_at = store.scan_runs(query, before=before, limit=limit, scan=scan)
        found.extend(keys(runs))
        stops.append(stopped_at)
        if stopped_at is not None:
            before = stopped_at
        elif len(runs) == limit:
            before = RunCursor(runs[-1].occurrence_at, runs[-1].key)
        else:
            return found, stops


def test_a_bounded_read_finds_the_text_in_the_runs_it_read_and_says_where_it_stopped(
        store: Store, runs: dict[str, list[str]]) -> None:
    every = keys(store.find_runs(RunQuery(), limit=100))
    # The three newest runs hold one of etl's: the read stops at the third, which it names.
    first, stopped_at = store.scan_runs(RunQuery(text="ETL:"), scan=3)
    assert keys(first) == [runs["etl"][3]]
    assert stopped_at is not None and stopped_at.key == every[2]
    # Read on from there, three at a time: every etl run once, in order, and the last read
    # (two runs left) says it read them all.
    found, stops = _scan_all(store, RunQuery(text="ETL:"), scan=3)
    assert found == newest_first(runs["etl"]) == keys(store.find_runs(RunQuery(text="etl:")))
    assert [s.key if s else None for s in stops] == [every[2], every[5], None]


def test_a_bounded_read_that_fills_its_page_or_reads_every_run_stops_nowhere(
        store: Store, runs: dict[str, list[str]]) -> None:
    page, stopped_at = store.scan_runs(RunQuery(text="etl:"), limit=1, scan=8)
    assert (keys(page), stopped_at) == ([runs["etl"][3]], None)
    # Eight runs in all: a read of eight found the error in the oldest but one, and none
    # follows the last it read.
    assert keys(store.scan_runs(RunQuery(text="missing"), scan=8).runs) == [runs["mail"][0]]
    assert store.scan_runs(RunQuery(text="missing"), scan=8).stopped_at is None
    # A read of seven still reaches it (mail's key comes first at the oldest instant), and
    # etl's oldest run follows.
    seven = store.scan_runs(RunQuery(text="missing"), scan=7)
    assert keys(seven.runs) == [runs["mail"][0]]
    assert seven.stopped_at is not None and seven.stopped_at.key == runs["mail"][0]


def test_a_bounded_read_counts_only_the_runs_the_other_criteria_find(
        store: Store, runs: dict[str, list[str]]) -> None:
    # B's newest run is mail's second (succeeded): no "missing" in it, and one more of B's
    # follows.
    query = RunQuery(worker=B, text="missing")
    runs_found, stopped_at = store.scan_runs(query, scan=1)
    assert runs_found == [] and stopped_at is not None and stopped_at.key == runs["mail"][1]
    assert _scan_all(store, query, scan=1)[0] == [runs["mail"][0]]
    # Without a text it is find_runs, a page at a time.
    assert _scan_all(store, RunQuery(schedule_name="etl"), scan=2, limit=3)[0] == newest_first(
        runs["etl"])


def test_only_the_trigram_indexes_make_a_text_search_indexed(
        backend: Backend, runs: dict[str, list[str]]) -> None:
    assert backend.store.text_search_indexed() is (backend.name == "postgres")


def test_a_search_within_a_budget_it_keeps_finds_the_same_runs(
        store: Store, runs: dict[str, list[str]]) -> None:
    for query in (RunQuery(text="etl:"), RunQuery(worker=B), RunQuery(text="MISSING")):
        assert store.find_runs(query, within=30) == store.find_runs(query)
