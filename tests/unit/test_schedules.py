"""The rules of the Schedules API, on the memory store and a manual clock.

What an edit reschedules and what it keeps, what pause, resume, delete and run-now change, and
what each refuses (leaving the stored schedule as it was). Damaged rows, cron day semantics and
validation at the door are in tests/celery/test_api.py; the command line's wording in
tests/cli/test_schedules.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from goatbeat_celery.api import REWRITE_ATTEMPTS, Schedules
from goatbeat_celery.config import GoatbeatConfig
from goatbeat_celery.core.types.errors import ConfigurationError, ScheduleConflict, ScheduleNotFound
from goatbeat_celery.core.types.execution import ExecutionState, manual_key
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.schedule import Schedule
from goatbeat_celery.core.types.spec import ScheduleSource, ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import ManualClock, MemoryStore, RecordingSubmitter, build_engine

#: Half a minute past a minute boundary: an every-minute schedule created now first runs at 12:01.
NOW = datetime(2026, 1, 5, 12, 0, 30, tzinfo=UTC)


def at(clock: str) -> datetime:
    """``"12:01:10"`` on NOW's day."""
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    return NOW.replace(hour=hours, minute=minutes, second=seconds)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def poll(schedules: Schedules) -> Schedule:
    """An every-minute schedule created at NOW: next run 12:01:00."""
    created = schedules.create("poll", "feeds.poll", every=60, args=(1,))
    assert (created.next_occurrence_at, created.next_run_at) == (at("12:01:00"), at("12:01:00"))
    return created


def unchanged(schedules: Schedules, before: Schedule) -> bool:
    return schedules.get(before.name) == before


# -- update -----------------------------------------------------------------------------------

def test_an_edit_of_the_task_or_arguments_keeps_the_next_run(
        schedules: Schedules, poll: Schedule, clock: ManualClock) -> None:
    clock.advance(10)

    updated = schedules.update("poll", task="feeds.poll_v2", args=(2,), kwargs={"full": True})

    assert (updated.spec.task, updated.spec.args) == ("feeds.poll_v2", (2,))
    assert dict(updated.spec.kwargs) == {"full": True}
    assert (updated.next_occurrence_at, updated.next_run_at) == (at("12:01:00"), at("12:01:00"))
    assert updated.row_version == poll.row_version + 1


def test_a_new_trigger_reschedules_from_the_store_clock(
        schedules: Schedules, poll: Schedule, clock: ManualClock) -> None:
    clock.advance(10)

    hourly = schedules.update("poll", every=3600)

    assert hourly.spec.trigger == TriggerSpec(kind="interval", params={"every": 3600.0})
    assert (hourly.next_occurrence_at, hourly.next_run_at) == (at("13:00:00"), at("13:00:00"))


def test_a_new_offset_moves_the_next_run_after_its_occurrence(
        schedules: Schedules, poll: Schedule, clock: ManualClock) -> None:
    clock.advance(10)

    shifted = schedules.update("poll", offset=10)

    assert (shifted.next_occurrence_at, shifted.next_run_at) == (at("12:01:00"), at("12:01:10"))


def test_an_edit_that_changes_nothing_writes_nothing(
        schedules: Schedules, poll: Schedule, clock: ManualClock) -> None:
    clock.advance(10)

    same = schedules.update("poll", every=60, args=(1,))

    assert same == poll
    assert unchanged(schedules, poll)


def test_enabled_false_pauses_and_enabled_true_resumes_from_now(
        schedules: Schedules, poll: Schedule, clock: ManualClock) -> None:
    paused = schedules.update("poll", enabled=False)
    assert not paused.spec.enabled
    assert paused.next_run_at == at("12:01:00"), "pausing keeps the next times"

    clock.move_to(at("12:05:20"))
    resumed = schedules.update("poll", enabled=True)

    assert resumed.spec.enabled
    assert (resumed.next_occurrence_at, resumed.next_run_at) == (at("12:06:00"), at("12:06:00"))
    assert resumed.total_missed == 0, "what fell due while paused is neither run nor missed"


@pytest.mark.parametrize(("changes", "field"), [
    ({"queue": "reports"}, "queue"),
    ({"timezone": "Europe/Paris"}, "timezone"),  # a zone means nothing to an interval
    ({"every": 60, "cron": "0 7 * * *"}, "trigger"),
    ({"misfire_policy": "sometimes"}, "misfire_policy"),
    ({"offset": -5}, "offset"),
], ids=["unknown-field", "zone-on-interval", "two-triggers", "unknown-policy",
        "negative-offset"])
def test_an_edit_refused_names_the_field_and_changes_nothing(
        schedules: Schedules, poll: Schedule, changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        schedules.update("poll", **changes)

    problems = [p.removeprefix("schedule 'poll': ") for p in raised.value.problems]
    assert any(p.startswith(f"{field}:") for p in problems), problems
    assert unchanged(schedules, poll)


def test_an_edit_to_a_task_outside_the_allow_list_is_refused(
        store: MemoryStore, poll: Schedule) -> None:
    guarded = Schedules(store, config=GoatbeatConfig(allowed_tasks=("feeds.*",)))
    guarded.update("poll", task="feeds.poll_v2")

    with pytest.raises(ConfigurationError, match="not in goatbeat_allowed_tasks"):
        guarded.update("poll", task="db.purge_everything")

    assert store.get_schedule("poll").spec.task == "feeds.poll_v2"


class EditedMeanwhile:
    """The store, where another writer edits a schedule right after the API has read it."""

    def __init__(self, store: MemoryStore, edit: Callable[[], object]) -> None:
        self._store = store
        self._edit = edit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def get_schedule(self, name: str) -> Schedule:
        read = self._store.get_schedule(name)
        self._edit()
        return read


@pytest.mark.parametrize("write", [
    lambda api: api.update("poll", args=(3,)),
    lambda api: api.update("poll", every=3600),
], ids=["update", "reschedule"])
def test_a_write_that_lost_a_race_with_another_edit_is_refused_and_the_other_edit_stays(
        store: MemoryStore, schedules: Schedules, poll: Schedule,
        write: Callable[[Schedules], object]) -> None:
    racing = Schedules(EditedMeanwhile(store, lambda: schedules.update("poll", args=(2,))))

    with pytest.raises(ScheduleConflict):
        write(racing)

    stored = store.get_schedule("poll")
    assert stored.spec.args == (2,) and stored.spec.enabled
    assert stored.row_version == poll.row_version + 1
    assert stored.version == poll.version + 1
    assert stored.next_run_at == at("12:01:00")


def test_a_pause_that_raced_another_edit_lands_on_top_of_it(
        store: MemoryStore, schedules: Schedules, poll: Schedule) -> None:
    # A pause depends on no definition: it is redone on what the other edit wrote.
    racing = Schedules(EditedMeanwhile(store, lambda: schedules.update("poll", args=(2,))))
    racing.pause("poll")
    stored = store.get_schedule("poll")
    assert stored.spec.args == (2,) and not stored.spec.enabled
    assert stored.version == poll.version + 1  # the edit's; the pause adds none


class ClaimedMeanwhile(EditedMeanwhile):
    """The store, where the leader's bookkeeping writes the row right after each of the API's
    first ``times`` reads (as a claim of an every-second schedule does)."""

    def __init__(self, store: MemoryStore, times: int) -> None:
        def bookkeeping() -> None:
            if self.left:
                self.left -= 1
                current = store.get_schedule("poll")
                store._schedules["poll"] = replace(  # noqa: SLF001 - the leader's write
                    current, row_version=current.row_version + 1, total_runs=current.total_runs + 1)
        super().__init__(store, bookkeeping)
        self.left = times


@pytest.mark.parametrize(("write", "landed"), [
    (lambda api, shown: api.update("poll", args=(3,), expected_version=shown),
     lambda s: s.spec.args == (3,)),
    (lambda api, shown: api.update("poll", every=3600),
     lambda s: s.spec.trigger.params["every"] == 3600),
    (lambda api, shown: api.pause("poll"), lambda s: not s.spec.enabled),
    (lambda api, shown: api.pause("poll", until=at("13:00:00")),
     lambda s: s.paused_until == at("13:00:00")),
], ids=["edit-with-version", "reschedule", "pause", "pause-until"])
def test_the_leaders_bookkeeping_between_read_and_write_never_refuses_a_change(
        store: MemoryStore, poll: Schedule, write: Callable[[Schedules, int], object],
        landed: Callable[[Schedule], bool]) -> None:
    racing = ClaimedMeanwhile(store, times=REWRITE_ATTEMPTS - 1)
    write(Schedules(racing), poll.version)
    stored = store.get_schedule("poll")
    assert racing.left == 0 and stored.total_runs == REWRITE_ATTEMPTS - 1
    assert landed(stored)


def test_a_resume_after_bookkeeping_lands_and_keeps_the_definition_version(
        store: MemoryStore, schedules: Schedules, poll: Schedule) -> None:
    schedules.pause("poll")
    racing = ClaimedMeanwhile(store, times=2)
    resumed = Schedules(racing).resume("poll")
    assert resumed.spec.enabled and resumed.version == poll.version


def test_runs_never_move_the_definition_version(store: MemoryStore, poll: Schedule) -> None:
    racing = ClaimedMeanwhile(store, times=REWRITE_ATTEMPTS)
    with pytest.raises(ScheduleConflict):  # the leader wrote the row at every single try
        Schedules(racing).update("poll", args=(3,))
    assert store.get_schedule("poll").version == poll.version


def test_an_edit_against_the_version_read_after_runs_is_accepted(
        store: MemoryStore, schedules: Schedules, poll: Schedule) -> None:
    for _ in range(5):  # five runs claimed: the row written five times, the definition never
        current = store.get_schedule("poll")
        store._schedules["poll"] = replace(  # noqa: SLF001 - the leader's write
            current, row_version=current.row_version + 1, total_runs=current.total_runs + 1)
    read = schedules.get("poll")
    assert read.row_version == poll.row_version + 5 and read.version == poll.version

    updated = schedules.update("poll", args=(3,), expected_version=read.version)

    assert updated.spec.args == (3,) and updated.version == read.version + 1


def test_an_edit_made_against_an_older_version_is_refused_and_changes_nothing(
        store: MemoryStore, schedules: Schedules, poll: Schedule) -> None:
    shown = poll.version
    schedules.update("poll", args=(2,))  # someone else's edit, after ours was shown

    with pytest.raises(ScheduleConflict, match=f"definition version {shown}, now {shown + 1}"):
        schedules.update("poll", args=(3,), expected_version=shown)

    assert store.get_schedule("poll").spec.args == (2,)
    updated = schedules.update("poll", args=(3,), expected_version=shown + 1)
    assert updated.spec.args == (3,) and updated.row_version == shown + 2


class BusyClock:
    """The store's clock as a busy machine reads it: each read a second after the one before,
    as when every round trip to the store takes that long."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock

    def __call__(self) -> datetime:
        self.clock.advance(1)
        return self.clock()


@pytest.mark.parametrize("write", ["create", "update"])
def test_a_one_time_instant_accepted_is_its_next_run_however_slow_the_store(
        write: str, clock: ManualClock) -> None:
    """An ``at`` judged still ahead is the run stored, never an instant judged again against a
    later read of the clock (where it may have passed, leaving a schedule accepted that never
    runs); one already past is refused and changes nothing. Leads on either side of each of the
    write's reads of the clock."""
    schedules = Schedules(MemoryStore(BusyClock(clock)))
    outcomes: set[str] = set()
    for index, lead in enumerate(step / 2 for step in range(1, 24)):
        name = f"launch-{index}"
        if write == "update":
            schedules.create(name, "shop.open_sales", every=3600)
        before = None if write == "create" else schedules.get(name)
        launch = clock() + timedelta(seconds=lead)
        try:
            written = (schedules.create(name, "shop.open_sales", at=launch) if write == "create"
                       else schedules.update(name, at=launch))
        except ConfigurationError as exc:
            assert "still ahead" in str(exc)
            if before is None:
                with pytest.raises(ScheduleNotFound):
                    schedules.get(name)
            else:
                assert unchanged(schedules, before)
            outcomes.add("refused")
            continue
        assert (written.next_occurrence_at, written.next_run_at) == (launch, launch), (
            f"at {lead} s ahead: accepted, stored with next run {written.next_run_at}")
        outcomes.add("accepted")
    assert outcomes == {"refused", "accepted"}


# -- pause and resume -------------------------------------------------------------------------

@pytest.mark.parametrize("write", ["pause", "pause_many"])
def test_a_pause_until_an_instant_accepted_runs_again_at_that_instant_however_slow_the_store(
        write: str, clock: ManualClock) -> None:
    """A pause's ``until`` judged still ahead is where the schedule runs again: its occurrence
    at ``until`` is the next run, never one after a later read of the clock (where ``until``
    may have passed, skipping that occurrence); one already past is refused and changes
    nothing. Every-second occurrences, ``until`` on one of them, on either side of each of the
    write's reads of the clock."""
    schedules = Schedules(MemoryStore(BusyClock(clock)))
    outcomes: set[str] = set()
    for index, lead in enumerate(range(12)):
        name = f"poll-{index}"
        before = schedules.create(name, "feeds.poll", every=1)
        until = clock() + timedelta(seconds=lead)
        try:
            if write == "pause":
                schedules.pause(name, until=until)
            else:
                assert schedules.pause_many([name], until=until).outcomes[0].done
        except ConfigurationError as exc:
            assert "is not after now" in str(exc)
            assert unchanged(schedules, before)
            outcomes.add("refused")
            continue
        paused = schedules.get(name)
        assert paused.paused_until == until
        assert (paused.next_occurrence_at, paused.next_run_at) == (until, until), (
            f"until {lead} s ahead: accepted, stored with next run {paused.next_run_at}")
        outcomes.add("accepted")
    assert outcomes == {"refused", "accepted"}


def test_a_paused_schedule_keeps_its_next_times_and_is_not_due(
        store: MemoryStore, schedules: Schedules, poll: Schedule, clock: ManualClock) -> None:
    paused = schedules.pause("poll")

    assert not paused.spec.enabled and paused.row_version == poll.row_version + 1
    assert (paused.next_occurrence_at, paused.next_run_at) == (at("12:01:00"), at("12:01:00"))
    clock.move_to(at("12:01:00"))
    assert not store.due_schedules(10).schedules


def test_resume_runs_from_the_first_occurrence_after_now_without_the_backlog(
        schedules: Schedules, poll: Schedule, clock: ManualClock) -> None:
    schedules.pause("poll")
    clock.move_to(at("12:05:20"))

    resumed = schedules.resume("poll")

    assert resumed.spec.enabled
    assert (resumed.next_occurrence_at, resumed.next_run_at) == (at("12:06:00"), at("12:06:00"))
    assert (resumed.total_runs, resumed.total_missed) == (0, 0)


def test_a_one_time_schedule_resumed_after_its_instant_has_no_next_run(
        schedules: Schedules, clock: ManualClock) -> None:
    schedules.create("launch", "shop.open_sales", at=at("12:10:00"))
    schedules.pause("launch")
    clock.move_to(at("12:20:00"))

    resumed = schedules.resume("launch")

    assert resumed.spec.enabled
    assert (resumed.next_occurrence_at, resumed.next_run_at) == (None, None)


def test_pausing_a_paused_schedule_or_resuming_a_running_one_writes_nothing(
        schedules: Schedules, poll: Schedule) -> None:
    assert schedules.resume("poll") == poll
    paused = schedules.pause("poll")

    assert schedules.pause("poll") == paused
    assert unchanged(schedules, paused)


def test_a_schedule_spec_is_kept_whole_by_pause_and_resume(
        schedules: Schedules, clock: ManualClock) -> None:
    created = schedules.create("digest", "mail.digest", cron="0 7 * * mon-fri",
                               timezone="Europe/Paris", kwargs={"to": "team"},
                               options={"queue": "mail"}, misfire_policy="all",
                               misfire_grace=600, starting_deadline=300)
    schedules.pause("digest")
    clock.advance(timedelta(days=1))

    resumed = schedules.resume("digest")

    assert resumed.spec == replace(created.spec, enabled=True)


# -- delete -----------------------------------------------------------------------------------

def test_a_deleted_schedule_is_gone_its_runs_stay_and_its_name_is_free(
        store: MemoryStore, schedules: Schedules, poll: Schedule) -> None:
    manual = schedules.run_now("poll")

    schedules.delete("poll")

    with pytest.raises(ScheduleNotFound):
        schedules.get("poll")
    assert schedules.list() == []
    assert [e.key for e in store.executions(schedule_name="poll")] == [manual.key]
    with pytest.raises(ScheduleNotFound):
        schedules.delete("poll")
    again = schedules.create("poll", "feeds.poll", every=60)
    assert again.row_version == 1


# -- run now ----------------------------------------------------------------------------------

def test_run_now_queues_a_manual_run_due_at_the_store_clock(
        store: MemoryStore, schedules: Schedules, poll: Schedule, clock: ManualClock) -> None:
    clock.advance(5)

    execution = schedules.run_now("poll")

    assert execution.key == manual_key("poll", at("12:00:35"))
    assert execution.manual and execution.state is ExecutionState.CLAIMED
    assert execution.occurrence_at == execution.due_at == at("12:00:35")
    assert store.oldest_pending() == execution
    assert unchanged(schedules, poll), "the timetable is not touched"


def test_a_second_run_now_at_the_same_instant_is_a_conflict(
        schedules: Schedules, poll: Schedule, clock: ManualClock) -> None:
    first = schedules.run_now("poll")

    with pytest.raises(ScheduleConflict):
        schedules.run_now("poll")

    clock.advance(1)
    assert schedules.run_now("poll").key != first.key


def test_a_paused_schedule_can_still_be_run_by_hand_and_the_leader_sends_it(
        store: MemoryStore, schedules: Schedules, poll: Schedule, clock: ManualClock) -> None:
    schedules.pause("poll")
    broker = RecordingSubmitter()
    leader = build_engine(store, clock=clock, submitter=broker, holder="a")

    manual = schedules.run_now("poll")
    leader.tick()
    clock.move_to(at("12:03:00"))
    leader.tick()

    assert broker.keys == [manual.key], "only the run asked for: the timetable stays paused"
    assert [d.task for d in broker.dispatches] == ["feeds.poll"]


def test_run_now_is_held_to_the_allow_list_but_a_config_schedule_is_trusted(
        store: MemoryStore, schedules: Schedules, poll: Schedule) -> None:
    config_spec = ScheduleSpec(name="cleanup", task="db.cleanup", source=ScheduleSource.CONFIG,
                               trigger=TriggerSpec(kind="interval", params={"every": 60.0}))
    store.create_schedule(config_spec, next_occurrence_at=at("12:01:00"),
                          next_run_at=at("12:01:00"))
    guarded = Schedules(store, config=GoatbeatConfig(allowed_tasks=("reports.*",)))

    with pytest.raises(ConfigurationError, match="'feeds.poll' is not in goatbeat_allowed_tasks"):
        guarded.run_now("poll")
    assert guarded.run_now("cleanup").manual

    assert [e.schedule_name for e in store.executions()] == ["cleanup"]


# -- every method, for a name that does not exist ---------------------------------------------

@pytest.mark.parametrize("call", [
    lambda api: api.get("nope"),
    lambda api: api.history("nope"),
    lambda api: api.update("nope", args=(1,)),
    lambda api: api.pause("nope"),
    lambda api: api.resume("nope"),
    lambda api: api.delete("nope"),
    lambda api: api.run_now("nope"),
], ids=["get", "history", "update", "pause", "resume", "delete", "run_now"])
def test_every_method_says_which_name_is_not_found(
        store: MemoryStore, schedules: Schedules, poll: Schedule,
        call: Callable[[Schedules], object]) -> None:
    with pytest.raises(ScheduleNotFound) as raised:
        call(schedules)

    assert raised.value.name == "nope"
    assert schedules.list() == [poll] and store.executions() == []

