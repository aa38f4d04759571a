"""A custom scheduler as users write one: a ``goatbeat_celery.Scheduler`` subclass that adds
entries in ``setup_schedule``, the names from the scenario's config (``declared``), one every
second each, half added before ``super().setup_schedule()`` and half after. Started with
``celery -A sysproj beat -S addproj:AddingScheduler``."""

from __future__ import annotations

from typing import Any

from sysproj import CONFIG

from goatbeat_celery import Scheduler


def _entry(name: str) -> dict[str, Any]:
    return {"task": "sysproj.record", "schedule": 1.0, "args": [name],
            "options": {"goatbeat": {"misfire_policy": "all"}}}


class AddingScheduler(Scheduler):  # type: ignore[misc]
    def setup_schedule(self) -> None:
        names: list[str] = CONFIG.get("declared", [])
        half = len(names) // 2
        for name in names[:half]:
            self.add(name=name, **_entry(name))
        super().setup_schedule()
        self.update_from_dict({name: _entry(name) for name in names[half:]})
