"""history says what made each run: the schedule, run-now, or a backfill (under the
occurrence's own key or a derived one), in its table and its JSON."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery.core.rules.backfill import BackfillRun, BackfillStep, backfill_key
from goatbeat_celery.core.types.execution import idempotency_key
from goatbeat_celery.store import Store

from .claims import TTL, claim_and_submit
from .conftest import Cli, table_rows


def backfill_step(store: Store, cli: Cli, name: str, occurrences: list[str]) -> int:
    """A backfill of ``name`` over two past minutes, its one step claimed as a leader would:
    the first under the occurrence's own key, the second under a derived one."""
    shown = cli.json("backfill", name, "--from", occurrences[0], "--to", occurrences[1],
                     "--mode", "all")
    backfill = store.get_backfill(shown["id"])
    own, again = backfill.start, backfill.end
    runs = (BackfillRun(occurrence_at=own, key=idempotency_key(name, own), reason="x"),
            BackfillRun(occurrence_at=again, key=backfill_key(name, again, backfill.id),
                        reason="x"))
    grant = store.acquire("default", "replica-a", TTL)
    assert grant is not None
    store.claim_backfill(BackfillStep(backfill_id=backfill.id, schedule_name=name,
                                      examined_before=0, examined=2, cursor=again, runs=runs,
                                      done=True), lease=grant)
    return backfill.id


def test_history_marks_run_now_and_backfill_runs_in_text_and_json(cli: Cli,
                                                                  store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60")
    scheduled = claim_and_submit(store, "poll", steps_back=1)
    manual = cli.json("run-now", "poll")["key"]
    end = store.get_schedule("poll").next_occurrence_at
    assert end is not None
    first, last = end - timedelta(minutes=9), end - timedelta(minutes=8)
    backfill = backfill_step(store, cli, "poll", [first.isoformat(), last.isoformat()])

    executions = cli.json("history", "poll")
    rows = table_rows(cli.ok("history", "poll").stdout)

    origins = {e["key"]: e["origin"] for e in executions}
    assert origins == {scheduled: None, manual: "run-now",
                       idempotency_key("poll", first): f"backfill {backfill}",
                       backfill_key("poll", last, backfill): f"backfill {backfill}"}
    assert sorted(row["MADE BY"] for row in rows) == sorted(
        ["-", "run-now", f"backfill {backfill}", f"backfill {backfill}"])
