"""The MySQL / MariaDB store: MySQL 8 or MariaDB 10.6 and later, through PyMySQL.

Lease expiry and due-ness are judged by the database's ``UTC_TIMESTAMP(6)``, instants are kept
as ``DATETIME(6)`` in UTC, claims lock schedules ``FOR UPDATE SKIP LOCKED`` under the lease
row's shared lock (the fence), and a crashed holder is detected through named locks
(``GET_LOCK``) held by its session. There is no LISTEN/NOTIFY: other replicas see an edit at
their next tick.

The modules: :mod:`.store` (:class:`MySQLStore`), :mod:`.engine` (engines and connections) and
:mod:`.sessions` (the named session locks).
"""

from __future__ import annotations

from goatbeat_celery.store.mysql.engine import create_migration_engine, create_mysql_engine
from goatbeat_celery.store.mysql.store import MySQLStore

__all__ = ["MySQLStore", "create_migration_engine", "create_mysql_engine"]
