"""Naive datetimes are refused wherever they can enter a store, before anything is written."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from goatbeat_celery.core.types.claims import PlannedClaim
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.spec import ScheduleSource, SyncEntry

from .conftest import Store
from .support import LONG_TTL, claim_next, create_due, interval_spec, snapshot


def _naive(store: Store) -> datetime:
    return store.now().replace(tzinfo=None)


@pytest.mark.parametrize("field", ["next_occurrence_at", "next_run_at"])
def test_create_refuses_a_naive_next_time(store: Store, field: str) -> None:
    aware = store.now()
    times = {"next_occurrence_at": aware, "next_run_at": aware, field: _naive(store)}

    with pytest.raises(ConfigurationError):
        store.create_schedule(interval_spec("report"), **times)

    assert store.list_schedules() == []


@pytest.mark.parametrize("field", ["next_occurrence_at", "next_run_at"])
def test_replace_refuses_a_naive_next_time(store: Store, field: str) -> None:
    schedule = create_due(store, "report")
    times = {"next_occurrence_at": schedule.next_occurrence_at,
             "next_run_at": schedule.next_run_at, field: _naive(store)}

    with pytest.raises(ConfigurationError):
        store.replace_schedule(interval_spec("report", every=300), **times)

    assert snapshot(store.get_schedule("report")) == snapshot(schedule)


#: Ways to slip a naive instant into an otherwise valid planned claim.
NAIVE_IN_CLAIM: dict[str, Callable[[PlannedClaim, datetime], PlannedClaim]] = {
    "occurrence": lambda c, naive: replace(c, occurrences=((naive, c.occurrences[0][1]),)),
    "due": lambda c, naive: replace(c, occurrences=((c.occurrences[0][0], naive),)),
    "next_occurrence_at": lambda c, naive: replace(c, next_occurrence_at=naive),
    "next_run_at": lambda c, naive: replace(c, next_run_at=naive),
}


@pytest.mark.parametrize("where", list(NAIVE_IN_CLAIM))
def test_claim_refuses_naive_instants(store: Store, where: str) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    schedule = create_due(store, "report")
    bad = NAIVE_IN_CLAIM[where](claim_next(schedule), _naive(store))

    with pytest.raises(ConfigurationError):
        store.claim([bad], lease=grant)

    assert store.executions() == []
    assert snapshot(store.get_schedule("report")) == snapshot(schedule)


def test_sync_refuses_a_naive_start(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    aware = store.now() + timedelta(minutes=1)
    entries = [
        SyncEntry(spec=interval_spec("good", source=ScheduleSource.CONFIG),
                  next_occurrence_at=aware, next_run_at=aware),
        SyncEntry(spec=interval_spec("bad", source=ScheduleSource.CONFIG),
                  next_occurrence_at=aware, next_run_at=aware.replace(tzinfo=None)),
    ]

    with pytest.raises(ConfigurationError):
        store.sync_config(entries, lease=grant)

    assert store.list_schedules() == []


def test_prune_refuses_a_naive_cut_off(store: Store) -> None:
    grant = store.acquire("beat", "a", LONG_TTL)
    assert grant is not None
    (dispatch,) = store.claim([claim_next(create_due(store, "report"))], lease=grant).dispatches
    store.mark_submitted([dispatch.key])

    with pytest.raises(ConfigurationError):
        store.prune(before=_naive(store) + timedelta(days=1), limit=10)

    assert [e.key for e in store.executions()] == [dispatch.key]
