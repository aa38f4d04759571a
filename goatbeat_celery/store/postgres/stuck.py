"""Sessions that hold a lease row past its expiry while stuck in the middle of a statement:
ended by the replica that would take the lease (:func:`end_stuck_holders`).

A leader frozen (SIGSTOP, a paused VM) while it writes one statement of a claim transaction to
its socket leaves its server session waiting for the rest of that statement, with the lease row
share-locked by the claim's fence. Between the messages of one statement PostgreSQL runs
neither the statement timeout nor the idle-in-transaction timeout, so nothing ends the session
until the process wakes, and every standby's lock request on the row waits as long. A standby
whose acquisition ran into its statement timeout asks the server which sessions block a lock
request on the row, and ends those reading from their client mid-statement once the lease has
expired by the store's clock: the holder's grant is over, and its open transaction, rolled
back, had claimed nothing yet.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg
from psycopg.generators import execute

from goatbeat_celery.store.postgres.engine import _close
from goatbeat_celery.store.schema import LEASE_TABLE

logger = logging.getLogger(__name__)

_EXPIRED = (f"SELECT 1 FROM {LEASE_TABLE} "
            "WHERE name = %(name)s AND holder IS NOT NULL AND expires_at <= now()")
_LOCK_ROW = f"SELECT 1 FROM {LEASE_TABLE} WHERE name = $1 FOR UPDATE".encode()
#: The sessions blocking ``waiter`` that wait for the rest of a statement from their client,
#: ended while the lease is still expired (read again in the same statement).
_END_STUCK = f"""
SELECT a.pid, pg_terminate_backend(a.pid)
FROM pg_stat_activity AS a
WHERE a.pid = ANY (pg_blocking_pids(%(waiter)s))
  AND a.state = 'active' AND a.wait_event = 'ClientRead'
  AND EXISTS ({_EXPIRED})
"""
_WAITS = "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %(waiter)s"
#: Between two looks at the lock request's blockers (seconds).
_LOOK_EVERY = 0.02


def end_stuck_holders(conninfo: str, connect_kwargs: dict[str, Any], name: str,
                      within: float) -> list[int]:
    """End the sessions stuck mid-statement that hold lease ``name``'s row while the lease is
    expired; returns their process ids. Spends at most about ``within`` seconds (a lock request
    on the row, on a connection of its own, for the server to name its blockers). Raises
    psycopg errors (the caller's to translate)."""
    looker = psycopg.connect(conninfo, autocommit=True, **connect_kwargs)
    waiter: psycopg.Connection[Any] | None = None
    try:
        if not looker.execute(_EXPIRED, {"name": name}).fetchall():
            return []
        waiter = psycopg.connect(conninfo, **connect_kwargs)
        waiter.execute("SELECT set_config('lock_timeout', %s, true)",
                       [f"{max(1, round(within * 1000))}ms"])
        pid = waiter.info.backend_pid
        pgconn = waiter.pgconn
        pgconn.send_query_params(_LOCK_ROW, [name.encode()])
        ended: list[int] = []
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            pgconn.consume_input()
            if not pgconn.is_busy():
                break  # granted (nothing blocks any more) or timed out
            if looker.execute(_WAITS, {"waiter": pid}).fetchone() == (True,):
                ended = [stuck for stuck, done in
                         looker.execute(_END_STUCK, {"waiter": pid, "name": name}).fetchall()
                         if done]
                break
            time.sleep(_LOOK_EVERY)
        waiter.wait(execute(pgconn))  # the request's end: granted, or its lock timeout
        waiter.rollback()
        for stuck in ended:
            logger.warning("ended database session %d: it held lease %r past its expiry while "
                           "stuck in the middle of a statement (a frozen holder)", stuck, name,
                           extra={"action": "stuck_holder_ended"})
        return ended
    finally:
        _close(waiter)
        _close(looker)
