"""Celery's own PersistentScheduler: a shelve file, its schedules from ``beat_schedule``."""

from __future__ import annotations

import populate

from .base import Adapter


class CeleryDefault(Adapter):
    kind = "default"
    label = "Celery default (shelve)"
    scheduler = "celery.beat:PersistentScheduler"
    no_edit = "n/a (restart needed)"
    no_failover = "n/a (one replica only)"
    no_idle_tick = "n/a (no store call per tick)"

    def setup(self) -> None:
        self.plan_file = self.world.workdir / "default-plan.json"

    def load(self, plan: populate.Plan) -> None:
        # It has no store of its own: benchproj builds ``beat_schedule`` from this file.
        populate.default(self.plan_file, plan)

    def env(self) -> dict[str, str]:
        return {"BENCH_DEFAULT_SCHEDULE": str(self.plan_file)}
