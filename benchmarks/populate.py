"""Fill each scheduler's own store with generated interval schedules, in bulk.

A :class:`Plan` says how many schedules, their interval and when each is first due: schedule
``i`` is due at ``first_due + floor(spread * i / count)`` (a whole-second wall-clock epoch, UTC).
Each loader writes the rows (or keys) the scheduler itself would have written, so the beat
process starts with exactly that schedule:

* goatbeat — ``goatbeat_schedule`` rows (``source='api'``), as ``Schedules.create(...,
  offset=...)`` makes them: the occurrence on the ``every`` grid and the offset that puts the
  run at the due instant, so later runs keep their place in the interval as under the others;
* django-celery-beat — ``PeriodicTask`` rows on one ``IntervalSchedule``, ``last_run_at`` one
  interval before the due instant;
* RedBeat — one hash per entry and the ``schedule`` sorted set, scored by due instant;
* Celery's default scheduler — nothing here: ``benchproj`` builds ``beat_schedule`` from the
  plan file (it has no other store), with ``last_run_at`` one interval before the due instant.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import redis
import sqlalchemy as sa

TASK = "bench.noop"


@dataclass(frozen=True)
class Plan:
    count: int
    every: float
    first_due: float
    spread: float = 0.0
    prefix: str = "s-"

    def name(self, index: int) -> str:
        return f"{self.prefix}{index:07d}"

    def due(self, index: int) -> float:
        # Offsets in whole seconds, as people write them (RedBeat compares whole seconds).
        return self.first_due + (math.floor(self.spread * index / self.count)
                                 if self.spread else 0)

    def index_of(self, name: str) -> int:
        return int(name[len(self.prefix):])


def goatbeat_mysql(engine: sa.Engine, plan: Plan) -> None:
    """The rows :func:`goatbeat` writes, on MySQL / MariaDB: built here (the SQL above is
    PostgreSQL's), written through the store's own table definition."""
    from goatbeat_celery.core.rules.shards import shard_hash
    from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec
    from goatbeat_celery.store.schema import execution_table, lease_table, schedule_table

    trigger = TriggerSpec(kind="interval", params={"every": plan.every})
    spec_hash = ScheduleSpec(name="x", task=TASK, trigger=trigger).spec_hash()
    now = datetime.now(timezone.utc)
    rows = []
    for index in range(plan.count):
        name, due = plan.name(index), plan.due(index)
        occurrence = math.floor(due / plan.every) * plan.every
        rows.append({
            "name": name, "task": TASK, "args": [name], "kwargs": {}, "options": {},
            "trigger": trigger.to_json(), "enabled": True, "source": "api",
            "spec_hash": spec_hash, "offset_seconds": timedelta(seconds=due - occurrence),
            "next_occurrence_at": datetime.fromtimestamp(occurrence, timezone.utc),
            "next_run_at": datetime.fromtimestamp(due, timezone.utc),
            "total_runs": 0, "total_missed": 0, "version": 1, "created_at": now,
            "updated_at": now, "shard_hash": shard_hash(name)})
    with engine.begin() as conn:
        for table in (execution_table, lease_table, schedule_table):
            conn.execute(sa.delete(table))
        for start in range(0, len(rows), 5_000):
            conn.execute(sa.insert(schedule_table), rows[start:start + 5_000])
    with engine.connect() as conn:
        conn.execute(sa.text("ANALYZE TABLE goatbeat_schedule, goatbeat_execution"))


def goatbeat(engine: sa.Engine, plan: Plan) -> None:
    from goatbeat_celery.core.rules.shards import shard_hash
    from goatbeat_celery.core.types.spec import ScheduleSpec, TriggerSpec

    trigger = TriggerSpec(kind="interval", params={"every": plan.every})
    spec = ScheduleSpec(name="x", task=TASK, trigger=trigger)
    with engine.begin() as conn:
        conn.execute(sa.text(
            "TRUNCATE goatbeat_schedule, goatbeat_execution, goatbeat_lease"))
        # due = occurrence (a multiple of every, counted from the epoch) + offset.
        conn.execute(sa.text(
            """
            INSERT INTO goatbeat_schedule (
                name, task, args, kwargs, options, trigger, enabled, source, spec_hash,
                offset_seconds, next_occurrence_at, next_run_at, total_runs, total_missed,
                version, created_at, updated_at)
            SELECT :prefix || lpad(i::text, 7, '0'), :task,
                   jsonb_build_array(:prefix || lpad(i::text, 7, '0')), '{}', '{}',
                   CAST(:trigger AS jsonb), true, 'api', :hash,
                   due - floor(due / :every) * :every,
                   to_timestamp(floor(due / :every) * :every), to_timestamp(due),
                   0, 0, 1, now(), now()
            FROM generate_series(0, :count - 1) AS i,
                 LATERAL (SELECT :first + floor(CAST(:spread AS float8) * i / :count)
                          AS due) AS d
            """),
            {"prefix": plan.prefix, "task": TASK, "trigger": json.dumps(trigger.to_json()),
             "hash": spec.spec_hash(), "first": plan.first_due, "spread": plan.spread,
             "count": plan.count, "every": plan.every})
        # The shard hash of each name (CRC-32, which SQL lacks), as goatbeat writes it.
        names = [plan.name(index) for index in range(plan.count)]
        conn.execute(sa.text(
            "UPDATE goatbeat_schedule AS s SET shard_hash = v.h "
            "FROM unnest(CAST(:names AS text[]), CAST(:hashes AS bigint[])) AS v(n, h) "
            "WHERE s.name = v.n"),
            {"names": names, "hashes": [shard_hash(name) for name in names]})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE goatbeat_schedule"))
        conn.execute(sa.text("VACUUM ANALYZE goatbeat_execution"))


def django(engine: sa.Engine, plan: Plan) -> None:
    """Rows as django-celery-beat's models write them (one template row made by the ORM, copied
    server-side), then the change marker its scheduler watches."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

    with engine.begin() as conn:
        # The ORM deletes row by row with signals: far too slow for a million rows.
        conn.execute(sa.text(
            f"TRUNCATE {PeriodicTask._meta.db_table}, {IntervalSchedule._meta.db_table} CASCADE"))
    interval = IntervalSchedule.objects.create(every=int(plan.every),
                                               period=IntervalSchedule.SECONDS)
    template = PeriodicTask.objects.create(name="template", task=TASK, interval=interval,
                                           args="[]")
    table = PeriodicTask._meta.db_table
    with engine.begin() as conn:
        columns = [c for c in conn.execute(sa.text(
            "SELECT column_name FROM information_schema.columns WHERE table_name = :t "
            "ORDER BY ordinal_position"), {"t": table}).scalars()
            if c not in ("id", "name", "args", "last_run_at")]
        listed = ", ".join(columns)
        conn.execute(sa.text(
            f"""
            INSERT INTO {table} (name, args, last_run_at, {listed})
            SELECT :prefix || lpad(i::text, 7, '0'),
                   '["' || :prefix || lpad(i::text, 7, '0') || '"]',
                   to_timestamp(:first + floor(CAST(:spread AS float8) * i / :count))
                       - make_interval(secs => :every),
                   {listed}
            FROM {table} AS t, generate_series(0, :count - 1) AS i WHERE t.id = :template
            """),
            {"prefix": plan.prefix, "first": plan.first_due, "spread": plan.spread,
             "count": plan.count, "every": plan.every, "template": template.pk})
        conn.execute(sa.text(f"DELETE FROM {table} WHERE id = :template"),
                     {"template": template.pk})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text(f"VACUUM ANALYZE {table}"))
    PeriodicTasks.update_changed()


def redbeat(client: redis.Redis, app: Any, plan: Plan) -> None:
    from redbeat.decoder import RedBeatJSONEncoder
    from redbeat.schedulers import ensure_conf

    conf = ensure_conf(app)
    every = timedelta(seconds=plan.every)
    from celery.schedules import schedule as interval

    encoded_schedule = json.dumps(interval(every), cls=RedBeatJSONEncoder)
    pipe = client.pipeline(transaction=False)
    for index in range(plan.count):
        name = plan.name(index)
        due = plan.due(index)
        quoted = json.dumps(name)
        definition = (f'{{"name": {quoted}, "task": "{TASK}", "args": [{quoted}], "kwargs": {{}}, '
                      f'"options": {{}}, "schedule": {encoded_schedule}, "enabled": true}}')
        last = datetime.fromtimestamp(due, timezone.utc) - every
        meta = json.dumps({"last_run_at": last}, cls=RedBeatJSONEncoder)
        key = conf.key_prefix + name
        pipe.hset(key, mapping={"definition": definition, "meta": meta})
        pipe.zadd(conf.schedule_key, {key: due})
        if index % 5000 == 4999:
            pipe.execute()
    pipe.execute()


def default(path: Path, plan: Plan) -> None:
    path.write_text(json.dumps(asdict(plan)))
