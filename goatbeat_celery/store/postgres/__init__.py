"""The PostgreSQL store: the production backend, shared by every replica.

Lease expiry and due-ness are judged by the database's ``now()``, never a host clock. Every
blocking call is bounded (connect timeout, ``statement_timeout``, TCP keepalives) so that no
call can outlive a leader's local deadline, and a session frozen inside a transaction is ended
by the server (``idle_in_transaction_session_timeout``) so its row locks cannot block a takeover.
Edits wake waiting replicas at once through ``LISTEN/NOTIFY`` on channel ``goatbeat``.

The modules: :mod:`.store` (:class:`PostgresStore`, the SQL store's PostgreSQL answers),
:mod:`.statements` (its own statements), :mod:`.engine` (engines and connections),
:mod:`.loaders` (reading values from the driver), :mod:`.arrays` (array parameters),
:mod:`.listen` (LISTEN/NOTIFY waiting) and :mod:`.direct` (the direct connection).
"""

from __future__ import annotations

from goatbeat_celery.store.postgres.arrays import array_literal
from goatbeat_celery.store.postgres.engine import _on_connect as _on_connect
from goatbeat_celery.store.postgres.engine import (
    connect_args,
    create_migration_engine,
    create_postgres_engine,
)
from goatbeat_celery.store.postgres.listen import CHANNEL
from goatbeat_celery.store.postgres.statements import _RECORD_RUNS as _RECORD_RUNS
from goatbeat_celery.store.postgres.statements import _report_arrays as _report_arrays
from goatbeat_celery.store.postgres.store import PostgresStore

__all__ = ["CHANNEL", "PostgresStore", "array_literal", "connect_args", "create_migration_engine",
           "create_postgres_engine"]
