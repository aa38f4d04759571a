"""Schedule controls through the Schedules API and the engine loop, on the memory store with a
manual clock: bounds, the run limit, pauses with a note and an end, previews equal to what then
runs, tags, and bad input refused at the door with every problem at once."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from goatbeat_celery import display
from goatbeat_celery.api import Schedules
from goatbeat_celery.config import base_registry
from goatbeat_celery.core.rules.controls import past_once_problem
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.instants import UTC
from goatbeat_celery.core.types.settings import Settings
from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
from goatbeat_celery.testing import ManualClock, MemoryStore, RecordingSubmitter, build_engine
from tests.unit.doubles import run_until

T0 = ManualClock.DEFAULT_START
S = timedelta(seconds=1)
M = timedelta(minutes=1)


class World:
    """One leader on a memory store, its clock moved by hand; the API on the same store."""

    def __init__(self, **settings: Any) -> None:
        self.clock = ManualClock()
        self.store = MemoryStore(self.clock)
        self.submitter = RecordingSubmitter()
        self.engine = build_engine(self.store, clock=self.clock, submitter=self.submitter,
                                   settings=Settings(max_interval=60, **settings), holder="a",
                                   triggers=base_registry())
        self.api = Schedules(self.store)

    def run_until(self, end: datetime) -> None:
        run_until(self.engine, self.clock, end)

    def sent(self, name: str = "job", *, manual: bool = False) -> list[datetime]:
        return [d.execution.due_at for d in self.submitter.dispatches
                if d.execution.schedule_name == name and d.execution.manual is manual]


@pytest.fixture
def world() -> World:
    return World()


# -- bounds --------------------------------------------------------------------------------
def test_a_schedule_runs_only_between_start_and_end(world: World) -> None:
    world.api.create("job", "app.job", every=60, start_at=T0 + 5 * M, end_at=T0 + 8 * M)
    world.run_until(T0 + 20 * M)
    assert world.sent() == [T0 + 5 * M, T0 + 6 * M, T0 + 7 * M, T0 + 8 * M]
    job = world.api.get("job")
    assert (job.next_run_at, job.total_runs) == (None, 4)


def test_bounds_apply_to_the_due_instant_after_the_offset(world: World) -> None:
    world.api.create("job", "app.job", every=60, offset=30, start_at=T0 + 5 * M,
                     end_at=T0 + 7 * M)
    world.run_until(T0 + 20 * M)
    assert world.sent() == [T0 + 5 * M + 30 * S, T0 + 6 * M + 30 * S]


def test_a_schedule_whose_end_has_passed_has_no_next_run(world: World) -> None:
    world.clock.advance(3600)
    created = world.api.create("job", "app.job", every=60, end_at=T0 + 5 * M)
    assert (created.next_occurrence_at, created.next_run_at) == (None, None)
    assert world.api.next_runs("job", 3) == []


def test_bounds_are_stored_in_utc(world: World) -> None:
    paris = timezone(timedelta(hours=1))
    created = world.api.create("job", "app.job", every=60,
                               start_at=datetime(2026, 1, 1, 2, 0, tzinfo=paris))
    assert created.spec.start_at == datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
    assert created.spec.start_at.tzinfo is UTC


def test_an_end_moved_earlier_by_an_edit_stops_the_runs_after_it(world: World) -> None:
    world.api.create("job", "app.job", every=60)
    world.run_until(T0 + 3 * M)
    world.api.update("job", end_at=T0 + 4 * M)
    world.run_until(T0 + 10 * M)
    assert world.sent() == [T0 + M, T0 + 2 * M, T0 + 3 * M, T0 + 4 * M]


def test_a_row_whose_next_run_lies_before_its_start_runs_from_the_start(world: World) -> None:
    # A start given by an edit that kept the stored next run: the claim moves it.
    world.api.create("job", "app.job", every=60)
    current = world.api.get("job")
    world.store.replace_schedule(
        ScheduleSpecWith(current.spec, start_at=T0 + 4 * M),
        next_occurrence_at=current.next_occurrence_at, next_run_at=current.next_run_at)
    world.run_until(T0 + 5 * M)
    assert world.sent() == [T0 + 4 * M, T0 + 5 * M]


def ScheduleSpecWith(spec: Any, **changes: Any) -> Any:  # noqa: N802 - reads as a constructor
    from dataclasses import replace
    return replace(spec, **changes)


# -- run limit -----------------------------------------------------------------------------
def test_a_limited_schedule_stops_after_max_runs(world: World) -> None:
    world.api.create("job", "app.job", every=60, max_runs=3)
    world.run_until(T0 + 10 * M)
    assert world.sent() == [T0 + M, T0 + 2 * M, T0 + 3 * M]
    job = world.api.get("job")
    assert (job.total_runs, job.next_run_at, job.runs_left) == (3, None, 0)


def test_manual_runs_do_not_count_toward_max_runs(world: World) -> None:
    world.api.create("job", "app.job", every=60, max_runs=2)
    world.api.run_now("job")
    world.run_until(T0 + 5 * M)
    assert len(world.sent(manual=True)) == 1
    assert world.sent() == [T0 + M, T0 + 2 * M]


def test_a_catch_up_claims_no_more_than_the_runs_left(world: World) -> None:
    world = World(misfire_policy="all", misfire_grace=3600)
    world.api.create("job", "app.job", every=60, max_runs=2)
    world.engine.tick()  # leads, nothing due yet
    world.clock.advance(10 * 60)
    world.engine.tick()
    assert world.sent() == [T0 + M, T0 + 2 * M]
    assert world.api.get("job").next_run_at is None


def test_raising_max_runs_after_the_limit_runs_the_schedule_again(world: World) -> None:
    world.api.create("job", "app.job", every=60, max_runs=1)
    world.run_until(T0 + 3 * M)
    assert world.api.get("job").next_run_at is None
    world.api.update("job", max_runs=2)
    assert world.api.next_runs("job", 5) == [T0 + 4 * M]
    world.run_until(T0 + 10 * M)
    assert world.sent() == [T0 + M, T0 + 4 * M]


# -- previews ------------------------------------------------------------------------------
@pytest.mark.parametrize("controls", [
    {},
    {"offset": 20},
    {"jitter": 50},
    {"start_at": T0 + 7 * M + 5 * S},
    {"end_at": T0 + 9 * M},
    {"max_runs": 4},
    {"start_at": T0 + 3 * M, "end_at": T0 + 30 * M, "max_runs": 6, "offset": 10},
], ids=["plain", "offset", "jitter", "start", "end", "max-runs", "all"])
def test_the_preview_lists_exactly_what_then_runs(world: World, controls: dict[str, Any]
                                                  ) -> None:
    world.api.create("job", "app.job", every=60, **controls)
    preview = world.api.next_runs("job", 8)
    world.run_until(T0 + 40 * M)
    assert world.sent()[:8] == preview


def test_the_preview_of_a_cron_schedule_follows_its_zone(world: World) -> None:
    world.api.create("job", "app.job", cron="30 2 * * *", timezone="Europe/Paris",
                     start_at=T0 + timedelta(days=2))
    preview = world.api.next_runs("job", 2)
    assert preview == [datetime(2026, 1, 3, 1, 30, tzinfo=UTC),
                       datetime(2026, 1, 4, 1, 30, tzinfo=UTC)]
    world.run_until(T0 + timedelta(days=4))
    assert world.sent() == preview


def test_the_preview_of_a_paused_schedule_is_empty(world: World) -> None:
    world.api.create("job", "app.job", every=60)
    world.api.pause("job")
    assert world.api.next_runs("job", 3) == []


@pytest.mark.parametrize("count", [0, -1, 1001, True, "3"])
def test_a_preview_count_out_of_range_is_refused(world: World, count: Any) -> None:
    world.api.create("job", "app.job", every=60)
    with pytest.raises(ConfigurationError, match="count: must be an integer from 1 to 1000"):
        world.api.next_runs("job", count)


# -- pause with a note and an end ----------------------------------------------------------
def test_a_pause_keeps_its_note_until_resumed(world: World) -> None:
    world.api.create("job", "app.job", every=60)
    paused = world.api.pause("job", note="vendor API down")
    assert (paused.spec.enabled, paused.paused_reason, paused.paused_until) == (
        False, "vendor API down", None)
    resumed = world.api.resume("job")
    assert (resumed.spec.enabled, resumed.paused_reason) == (True, None)


def test_a_pause_with_an_end_resumes_by_itself_at_that_instant(world: World) -> None:
    world.api.create("job", "app.job", every=60)
    world.run_until(T0 + 2 * M)
    paused = world.api.pause("job", note="maintenance", until=T0 + 6 * M + 30 * S)
    assert paused.paused_at(world.clock()) and paused.spec.enabled
    assert world.api.next_runs("job", 2) == [T0 + 7 * M, T0 + 8 * M]
    world.run_until(T0 + 9 * M)
    # Occurrences inside the pause never run, and are not counted missed.
    assert world.sent() == [T0 + M, T0 + 2 * M, T0 + 7 * M, T0 + 8 * M, T0 + 9 * M]
    job = world.api.get("job")
    assert job.total_missed == 0
    assert not job.paused_at(world.clock())


def test_a_late_leader_after_a_pause_follows_the_misfire_policy(world: World) -> None:
    world.api.create("job", "app.job", every=60, misfire_policy="latest", misfire_grace=600)
    world.engine.tick()
    world.api.pause("job", until=T0 + 5 * M)
    # No leader ticks until well after the pause ended: the points after the end are late.
    world.clock.advance(8 * 60 + 10)
    world.engine.tick()
    assert world.sent() == [T0 + 8 * M]
    assert world.api.get("job").total_missed == 3  # 5, 6 and 7 coalesced into 8


def test_an_edit_during_a_pause_with_an_end_keeps_the_pause(world: World) -> None:
    world.api.create("job", "app.job", every=60)
    world.api.pause("job", note="freeze", until=T0 + 10 * M)
    edited = world.api.update("job", every=120)
    assert (edited.paused_reason, edited.paused_until) == ("freeze", T0 + 10 * M)
    assert edited.next_run_at == T0 + 10 * M


def test_resume_ends_a_pause_with_an_end_at_once(world: World) -> None:
    world.api.create("job", "app.job", every=60)
    world.api.pause("job", until=T0 + 10 * M)
    resumed = world.api.resume("job")
    assert (resumed.paused_until, resumed.next_run_at) == (None, T0 + M)


def test_resume_runs_from_the_next_occurrence_after_now_without_backlog(world: World) -> None:
    world.api.create("job", "app.job", every=60, misfire_policy="all", misfire_grace=3600)
    world.run_until(T0 + M)
    world.api.pause("job")
    world.run_until(T0 + 5 * M + 30 * S)
    world.api.resume("job")
    world.run_until(T0 + 7 * M)
    assert world.sent() == [T0 + M, T0 + 6 * M, T0 + 7 * M]
    assert world.api.get("job").total_missed == 0


def test_bad_pause_arguments_are_all_reported_and_nothing_changes(world: World) -> None:
    world.api.create("job", "app.job", every=60)
    before = world.api.get("job")
    with pytest.raises(ConfigurationError) as raised:
        world.api.pause("job", note="x" * 501, until=T0 - M)
    assert [p.split(":")[0] for p in raised.value.problems] == ["note", "until"]
    with pytest.raises(ConfigurationError, match="until: naive datetime"):
        world.api.pause("job", until=datetime(2026, 1, 2))  # noqa: DTZ001 - refused
    assert world.api.get("job") == before


# -- description and tags ------------------------------------------------------------------
def test_tags_filter_the_list_and_every_tag_must_match(world: World) -> None:
    world.api.create("a", "app.job", every=60, tags=["billing", "nightly"],
                     description="Invoices\nfor the day")
    world.api.create("b", "app.job", every=60, tags=["billing"])
    world.api.create("c", "app.job", every=60)
    assert [s.name for s in world.api.list(tags=["billing"])] == ["a", "b"]
    assert [s.name for s in world.api.list(tags=["billing", "nightly"])] == ["a"]
    assert [s.name for s in world.api.list(tags="nightly")] == ["a"]
    assert world.api.get("a").spec.description == "Invoices\nfor the day"


def test_description_and_tags_change_without_moving_the_next_run(world: World) -> None:
    created = world.api.create("job", "app.job", every=60)
    edited = world.api.update("job", description="hello", tags=["x"])
    assert (edited.spec.description, edited.spec.tags) == ("hello", ("x",))
    assert edited.next_run_at == created.next_run_at


def test_bad_controls_are_all_reported_at_once_and_nothing_is_stored(world: World) -> None:
    with pytest.raises(ConfigurationError) as raised:
        world.api.create("job", "app.job", every=60, start_at=T0 + 10 * M, end_at=T0,
                         max_runs=-1, tags=["ok", "has space", "a,b", "", "ok"],
                         description="bell\x07")
    text = "\n".join(raised.value.problems)
    for expected in ("end_at: 2026-01-01T00:00:00+00:00 is before start_at",
                     "max_runs: must be an integer from 1 to",
                     "tags: 'has space' contains whitespace or a comma",
                     "tags: 'a,b' contains whitespace or a comma",
                     "tags: '' is empty", "tags: 'ok' given more than once",
                     "description: contains control or invisible characters"):
        assert expected in text
    assert world.api.list() == []


def test_naive_bounds_are_refused_naming_the_field(world: World) -> None:
    with pytest.raises(ConfigurationError) as raised:
        world.api.create("job", "app.job", every=60,
                         start_at=datetime(2026, 1, 1),  # noqa: DTZ001 - refused
                         end_at=datetime(2026, 1, 2))  # noqa: DTZ001 - refused
    assert [p.split(":")[0] for p in raised.value.problems] == ["start_at", "end_at"]


@pytest.mark.parametrize("tags", ["billing", ["x" * 65], [str(n) for n in range(21)], [1]])
def test_tags_of_the_wrong_shape_are_refused(world: World, tags: Any) -> None:
    with pytest.raises(ConfigurationError, match="tags: "):
        world.api.create("job", "app.job", every=60, tags=tags)


# -- logging -------------------------------------------------------------------------------
def test_the_end_of_a_schedule_is_logged_once(world: World,
                                              caplog: pytest.LogCaptureFixture) -> None:
    world.api.create("job", "app.job", every=60, max_runs=2)
    world.api.create("window", "app.job", every=60, end_at=T0 + 2 * M + 30 * S)
    with caplog.at_level("INFO", logger="goatbeat_celery.core.loop.planner"):
        world.run_until(T0 + 10 * M)
    ended = [r for r in caplog.records if getattr(r, "action", None) == "schedule_ended"]
    assert sorted(r.getMessage() for r in ended) == [
        "schedule 'job' ends: this claim reaches its max_runs (2)",
        "schedule 'window' ends: its next run would fall after its end_at "
        "2026-01-01T00:02:30+00:00",
    ]


def test_a_schedule_out_of_runs_gets_no_next_run_from_a_resume_or_an_edit(world: World) -> None:
    world.api.create("job", "app.job", every=60, max_runs=1)
    world.run_until(T0 + 2 * M)
    world.api.pause("job")
    assert world.api.resume("job").next_run_at is None
    assert world.api.update("job", every=120).next_run_at is None
    assert world.api.pause("job", until=T0 + 10 * M).next_run_at is None


def test_a_failover_never_runs_a_limited_schedule_past_its_limit() -> None:
    clocks = ManualClock(T0)
    store = MemoryStore(clocks)
    submitters = {holder: RecordingSubmitter() for holder in ("a", "b")}
    replicas = {holder: build_engine(store, submitter=submitters[holder],
                                     settings=Settings(lease_ttl=10, lease_renew_interval=3,
                                                       max_interval=60, misfire_policy="all",
                                                       misfire_grace=3600),
                                     holder=holder, monotonic=clocks.monotonic_for(holder))
                for holder in ("a", "b")}
    Schedules(store).create("job", "app.job", every=1, max_runs=5)
    replicas["a"].tick()
    clocks.advance(3)
    replicas["a"].tick()  # claims the points at T0 + 1, 2, 3 s
    # The leader freezes; the standby takes over with the runs it finds due by then.
    clocks.advance(20, frozen=["a"])
    for _ in range(3):
        replicas["b"].tick()
    # The old leader wakes with its stale lease and tries again.
    replicas["a"].tick()
    clocks.advance(10)
    for engine in replicas.values():
        engine.tick()
    sent = [key for submitter in submitters.values() for key in submitter.keys]
    assert len(set(sent)) == 5
    job = store.get_schedule("job")
    assert (job.total_runs, job.next_run_at) == (5, None)


# -- how the faces show them ---------------------------------------------------------------
def test_the_state_shows_a_pause_with_an_end_until_it_passes_then_the_end(world: World) -> None:
    world.api.create("job", "app.job", every=60, max_runs=1)
    paused = world.api.pause("job", note="freeze", until=T0 + 5 * M)
    assert display.state_text(paused, world.clock()) == "paused until 2026-01-01T00:05:00Z"
    assert display.schedule_json(paused, Settings(), world.clock())["state"] == "paused until"
    assert world.api.list(enabled=False) == [paused] and world.api.list(enabled=True) == []
    assert world.api.counts().paused == 1
    fields = dict(display.schedule_fields(paused, Settings(), world.clock()))
    assert fields["paused because"] == "freeze"
    assert fields["max runs"] == "1 (1 left)"
    world.run_until(T0 + 7 * M)
    done = world.api.get("job")
    assert display.state_text(done, world.clock()) == "ended"
    fields = dict(display.schedule_fields(done, Settings(), world.clock()))
    assert "paused because" not in fields and "paused until" not in fields
    assert display.schedule_json(done, Settings(), world.clock())["runs_left"] == 0


# -- a one-off's past instant, judged only on fields within their rules ---------------------
def _one_off(at: datetime, **fields: Any) -> ScheduleSpec:
    return ScheduleSpec(**{"name": "launch", **fields}, task="proj.tasks.launch",
                        trigger=TriggerSpec(kind="once", params={"at": at.isoformat()}))


@pytest.mark.parametrize("fields", [
    {"offset": timedelta(days=-730120)}, {"offset": timedelta.max}, {"offset": timedelta.min},
    {"jitter": timedelta.max}, {"offset": -S}, {"offset": timedelta(days=8)},
    {"offset": S, "jitter": S}, {"name": 0, "jitter": S},
], ids=["offset-730120-days-back", "offset-max", "offset-min", "jitter-max", "offset-negative",
        "offset-past-its-bound", "offset-and-jitter", "jitter-of-an-integer-name"])
def test_a_one_off_is_not_judged_past_through_a_shift_that_breaks_its_rule(
        fields: dict[str, Any]) -> None:
    """The shift's own problem names it: adding it to ``at`` means nothing, and may overflow
    (``OverflowError``) or fail on the name (``AttributeError``)."""
    spec = _one_off(datetime(1980, 1, 1, tzinfo=UTC), **fields)

    assert spec.checked_offset() is None
    assert past_once_problem(spec, T0) is None
    assert spec.problems(), "a shift past its rule must be named by the spec's own problems"


def test_a_one_off_past_after_a_shift_within_its_rules_is_still_refused() -> None:
    spec = _one_off(T0 - timedelta(days=8), offset=timedelta(days=7))

    assert spec.checked_offset() == timedelta(days=7)
    problem = past_once_problem(spec, T0)
    assert problem is not None and str(problem).startswith("at: ")
    assert past_once_problem(_one_off(T0 - M, jitter=S), T0) is not None


@pytest.mark.parametrize("at", [datetime(1, 1, 3, tzinfo=UTC), datetime(9999, 12, 29, tzinfo=UTC)],
                         ids=["year-1", "year-9999"])
def test_a_one_off_at_out_of_range_is_left_to_its_own_check(at: datetime) -> None:
    assert past_once_problem(_one_off(at, offset=timedelta(days=7)), T0) is None


@pytest.mark.parametrize("arguments", [
    {"name": 0, "jitter": 1},
    {"name": "launch", "offset": timedelta(days=-730120)},
    {"name": "launch", "jitter": timedelta.max},
], ids=["integer-name-with-jitter", "offset-730120-days-back", "jitter-max"])
@pytest.mark.parametrize("at", [datetime(1980, 1, 1, tzinfo=UTC), T0 + timedelta(days=1)],
                         ids=["past", "ahead"])
def test_create_refuses_a_bad_name_or_shift_of_a_one_off_naming_the_field(
        world: World, arguments: dict[str, Any], at: datetime) -> None:
    shift = {key: value for key, value in arguments.items() if key != "name"}
    field = "name" if arguments["name"] == 0 else next(iter(shift))

    with pytest.raises(ConfigurationError) as refused:
        world.api.create(arguments["name"], "proj.tasks.launch", at=at, **shift)

    assert any(f": {field}: " in problem for problem in refused.value.problems), (
        refused.value.problems)
    assert world.store.list_schedules() == []
