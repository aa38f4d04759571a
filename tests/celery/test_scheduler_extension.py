"""The Scheduler's extension points, as django-celery-beat has them: ``submitter_class`` (the
class that sends each run to the broker) and ``make_engine()`` (the engine a replica runs),
each set on a subclass and run with a real Celery app, the memory broker and a SQLite store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from goatbeat_celery.beat.scheduler import Scheduler
from goatbeat_celery.beat.submitter import CelerySubmitter
from goatbeat_celery.core.loop.engine import Engine
from goatbeat_celery.core.types.claims import Dispatch, SubmitResult
from goatbeat_celery.store import Store
from tests.celery.support import EVERY_SECOND, TIMEOUT, app_for, submitted
from tests.support.waiting import wait_for


class CountingSubmitter(CelerySubmitter):
    """Celery's submitter, writing down the key of each run it is handed."""

    def __init__(self, app: Any, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.keys: list[str] = []

    def submit(self, dispatches: Sequence[Dispatch], *, token: int,
               timeout: float) -> SubmitResult:
        self.keys.extend(dispatch.key for dispatch in dispatches)
        return super().submit(dispatches, token=token, timeout=timeout)


class CountingScheduler(Scheduler):
    submitter_class = CountingSubmitter


def test_a_subclass_sets_the_submitter_class_and_its_runs_go_through_it(tmp_path: Path) -> None:
    app = app_for(tmp_path, EVERY_SECOND)
    scheduler = CountingScheduler(app=app, max_interval=0.2)
    try:
        engine = scheduler.engine
        assert engine is not None
        submitter = engine.submitter
        assert isinstance(submitter, CountingSubmitter)
        assert submitter.scheduler is scheduler
        sent = wait_for(lambda: submitted(app, "every-second"), "a run sent",
                        tick=scheduler.tick, timeout=TIMEOUT)
        assert {execution.key for execution in sent} <= set(submitter.keys)
    finally:
        scheduler.close()


def test_the_default_submitter_class_is_celerys() -> None:
    assert Scheduler.submitter_class is CelerySubmitter


class NamedHolderScheduler(Scheduler):
    """Builds goatbeat's engine under a lease holder id of its own making."""

    built: list[tuple[Store, str]]

    def make_engine(self, store: Store, holder: str) -> Engine:
        self.built = [*getattr(self, "built", []), (store, holder)]
        return super().make_engine(store, f"audited-{holder}")


def test_a_subclass_builds_the_engine_with_make_engine_once_and_it_leads(tmp_path: Path) -> None:
    app = app_for(tmp_path, EVERY_SECOND)
    scheduler = NamedHolderScheduler(app=app, max_interval=0.2)
    try:
        engine = scheduler.engine
        assert engine is not None
        assert len(scheduler.built) == 1
        store, holder = scheduler.built[0]
        assert engine.store is store and engine.holder == f"audited-{holder}"
        scheduler.setup_schedule()  # a second call builds nothing
        assert len(scheduler.built) == 1 and scheduler.engine is engine
        wait_for(lambda: submitted(app, "every-second"), "a run sent", tick=scheduler.tick,
                 timeout=TIMEOUT)
        assert engine.grant is not None and engine.grant.holder == f"audited-{holder}"
    finally:
        scheduler.close()


def test_the_lazy_instance_builds_no_engine(tmp_path: Path) -> None:
    scheduler = NamedHolderScheduler(app=app_for(tmp_path, EVERY_SECOND), lazy=True)
    try:
        assert scheduler.engine is None and not hasattr(scheduler, "built")
    finally:
        scheduler.close()
