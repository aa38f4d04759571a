"""goatbeat_celery.Scheduler on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import populate
import sqlalchemy as sa

from .base import Adapter


class Goatbeat(Adapter):
    kind = "goatbeat"
    label = "goatbeat (PostgreSQL)"
    scheduler = "goatbeat_celery.Scheduler"

    def setup(self) -> None:
        from goatbeat_celery.store import upgrade_schema

        self.url = self.world.create_database("goatbeat_bench_cmp").render_as_string(
            hide_password=False)
        upgrade_schema(self.url)
        self.engine = sa.create_engine(self.url, poolclass=sa.NullPool)
        self._api: Any = None

    def teardown(self) -> None:
        if self._api is not None:
            self._api.close()
        self.engine.dispose()

    def load(self, plan: populate.Plan) -> None:
        populate.goatbeat(self.engine, plan)

    def env(self) -> dict[str, str]:
        return {"BENCH_GOATBEAT_URL": self.url}

    def failover_settings(self, ttl: int, poll: int) -> dict[str, Any]:
        return {"goatbeat_lease_ttl": ttl, "goatbeat_lease_renew_interval": poll}

    def shard_settings(self, shards: int, ttl: int, poll: int) -> dict[str, Any]:
        """Replicas splitting the schedules into ``shards``, with the failover lease."""
        return {"goatbeat_shards": shards, **self.failover_settings(ttl, poll)}

    def shards_shared(self, replicas: int, shards: int) -> bool:
        """Every shard led, by as many replicas as can each lead one."""
        from goatbeat_celery.core.rules.shards import Shard, shard_lease_name
        from goatbeat_celery.core.types.settings import Settings

        lease = Settings().lease_name
        names = [shard_lease_name(lease, Shard(index=k, count=shards)) for k in range(shards)]
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT name, holder FROM goatbeat_lease WHERE expires_at > now() "
                "AND name = ANY(:names)"), {"names": names}).all()
        return len(rows) == shards and len({row.holder for row in rows}) == min(replicas,
                                                                                 shards)

    def edit_due_now(self, name: str) -> float:
        # A one-time run at an instant already past by the store's clock would never run (the
        # API refuses it), and the update takes a few round trips: due 0.25 s from now, timed
        # from then. The loaded rows carry the offset that spreads them over their interval; an
        # offset shifts a one-time run too, so it goes.
        from goatbeat_celery.core.types.errors import ConfigurationError

        client = self._client()  # opened (the first time) before the instant is chosen
        for lead in (0.25, 1.0):
            due = datetime.now(timezone.utc) + timedelta(seconds=lead)
            try:
                row = client.update(name, at=due, offset=None)
            except ConfigurationError:
                # The update's round trips outlasted the lead (a machine busy with other
                # work): a later instant, still timed from the instant set.
                continue
            if row.next_run_at != due:
                # Said here rather than as a message that never comes.
                raise RuntimeError(f"edit of {name}: at {due.isoformat()} accepted, stored "
                                   f"with next run {row.next_run_at}")
            return due.timestamp()
        raise RuntimeError(f"edit of {name}: the update outlasted a lead of 1 s twice")

    def _store(self) -> Any:
        """A store on this adapter's database (each adapter names its store class)."""
        from goatbeat_celery.store.postgres import PostgresStore

        return PostgresStore(self.url)

    def _client(self) -> Any:
        """The client API on an open store (opened once, as an application would)."""
        if self._api is None:
            from goatbeat_celery.api import Schedules

            self._api = Schedules(self._store())
            self._api.list(limit=1)  # connect before anything is timed
        return self._api

    @contextmanager
    def idle_tick(self) -> Iterator[Callable[[], None]]:
        store = self._store()
        grant = store.acquire("bench-idle", "bench", timedelta(seconds=600))
        assert grant is not None

        def call() -> None:
            store.take_pending(lease=grant, limit=500)
            assert not store.due_schedules(500).schedules

        try:
            yield call
        finally:
            store.release(grant)
            store.close()
