"""QuietWakes (core.loop.quiet_wakes) on its own: when a wake may start from the store's answer
of what waits, what a wait that hears a change records, and what that answer leaves to do. The
engine's quiet wakes end to end are tests/unit/test_quiet_wakes.py."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery.core.loop.looks import TIMER_SLACK, LookLedger
from goatbeat_celery.core.loop.quiet_wakes import QuietWakes, nothing_waits
from goatbeat_celery.core.loop.store_clock import StoreClock
from goatbeat_celery.core.types.claims import Waiting
from goatbeat_celery.core.types.errors import StoreUnavailable
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import ManualClock, MemoryStore

EVERY_HOUR = TriggerSpec(kind="interval", params={"every": 3600})


class AnnouncingStore(MemoryStore):
    """The memory store, waking its waiter on every change as PostgreSQL's NOTIFY does: a
    change announced while nobody waits is heard by the next wait."""

    wakes_on_every_change = True

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.announced = False

    def notify(self) -> None:
        self.announced = True
        super().notify()

    def wait(self, timeout: float) -> bool:
        heard, self.announced = self.announced, False
        return heard


class BrokenWaitStore(AnnouncingStore):
    def wait(self, timeout: float) -> bool:
        raise StoreUnavailable("connection lost")


class Setup:
    def __init__(self, store: MemoryStore, clock: ManualClock) -> None:
        self.store, self.clock = store, clock
        self.looks = LookLedger()
        self.store_clock = StoreClock(clock.monotonic)
        self.heard = 0
        self.wakes = QuietWakes(store=store, looks=self.looks, clock=self.store_clock,
                                on_heard=self.on_heard)

    def on_heard(self) -> None:
        self.heard += 1

    def looked(self, token: int, next_due_in: float | None = None) -> None:
        """A full look under ``token`` that found the next run ``next_due_in`` seconds on."""
        now = self.store_clock.read(self.clock.current)
        self.looks.begin()
        self.looks.finished(token, None if next_due_in is None
                            else now + timedelta(seconds=next_due_in))


def setup(store_class: type[MemoryStore] = AnnouncingStore) -> Setup:
    clock = ManualClock()
    return Setup(store_class(clock), clock)


def test_a_wake_after_a_look_under_the_same_grant_may_start_quiet() -> None:
    world = setup()
    assert not world.wakes.may_start_quiet(3)  # nothing looked at yet
    world.looked(3, next_due_in=60)
    assert world.wakes.may_start_quiet(3)
    assert not world.wakes.may_start_quiet(4)  # another grant: another leader may have written
    assert not world.wakes.may_start_quiet(None)


def test_a_store_that_cannot_announce_every_change_never_starts_a_wake_quiet() -> None:
    world = setup(MemoryStore)
    world.looked(3)
    assert not world.wakes.may_start_quiet(3)


def test_a_wake_for_a_due_run_starts_from_the_stores_answer_which_calls_for_a_look() -> None:
    # The answer then tells the look whether ends or claims wait besides the due run, rather
    # than the look reading both before its first claim.
    world = setup()
    due = world.clock.current + timedelta(seconds=60)
    world.store.create_schedule(ScheduleSpec(name="minutely", task="app.t", trigger=EVERY_HOUR),
                                next_occurrence_at=due, next_run_at=due)
    world.looked(3, next_due_in=60)
    world.clock.advance(60)
    assert world.wakes.may_start_quiet(3)
    waiting = world.wakes.ask()
    assert not nothing_waits(waiting)
    assert not (waiting.unsettled or waiting.claimed)


def test_a_change_heard_in_a_wait_calls_for_a_full_look_and_is_passed_on() -> None:
    world = setup()
    world.looked(3)
    assert not world.wakes.wait(1.0) and world.heard == 0
    assert world.wakes.may_start_quiet(3)
    world.store.notify()
    assert world.wakes.wait(1.0) and world.heard == 1
    assert world.looks.changes_heard and not world.wakes.may_start_quiet(3)


def test_a_wait_of_nothing_asks_the_store_nothing() -> None:
    world = setup(BrokenWaitStore)
    assert world.wakes.wait(0.0) is False and world.heard == 0


def test_a_failing_wait_is_waited_out_as_nothing_heard() -> None:
    world = setup(BrokenWaitStore)
    world.looked(3)
    assert world.wakes.wait(0.01) is False
    assert world.heard == 0 and world.wakes.may_start_quiet(3)


def test_asking_what_waits_reads_the_stores_clock_and_next_due_instant() -> None:
    world = setup()
    due = world.clock.current + timedelta(hours=1)
    world.store.create_schedule(ScheduleSpec(name="hourly", task="app.t", trigger=EVERY_HOUR),
                                next_occurrence_at=due, next_run_at=due)
    waiting = world.wakes.ask()
    assert waiting.now == world.clock.current and waiting.next_due_at == due
    assert world.store_clock.now() == world.clock.current
    assert world.looks.next_due_at == due
    assert nothing_waits(waiting)


def test_nothing_waits_only_when_no_run_end_claim_or_backfill_does() -> None:
    now = ManualClock.DEFAULT_START
    idle = Waiting(now=now, next_due_at=now + timedelta(minutes=1), unsettled=False,
                   claimed=False, open_runs=True, backfills=False)
    assert nothing_waits(idle)
    for busy in ({"unsettled": True}, {"claimed": True}, {"backfills": True},
                 {"next_due_at": now + timedelta(seconds=TIMER_SLACK)}):
        assert not nothing_waits(Waiting(**{**vars(idle), **busy})), busy
