"""goatbeat_celery.Scheduler on MySQL / MariaDB: the same scheduler on the store without
LISTEN/NOTIFY, beside its PostgreSQL column in the same run (``--only goatbeat,goatbeat-mysql``).

Its database is created on ``GOATBEAT_BENCH_MYSQL_URL`` (default
``mysql+pymysql://root@127.0.0.1:3306/test``) and dropped at the end of the run.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import populate
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from .goatbeat import Goatbeat

DEFAULT_MYSQL = "mysql+pymysql://root@127.0.0.1:3306/test"


class GoatbeatMySQL(Goatbeat):
    kind = "goatbeat-mysql"
    label = "goatbeat (MariaDB)"

    def setup(self) -> None:
        from goatbeat_celery.store import upgrade_schema

        server = make_url(os.environ.get("GOATBEAT_BENCH_MYSQL_URL", DEFAULT_MYSQL))
        self._name = f"goatbeat_bench_cmp_{uuid.uuid4().hex[:8]}"
        self._admin = sa.create_engine(server, isolation_level="AUTOCOMMIT",
                                       poolclass=sa.NullPool)
        with self._admin.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE `{self._name}` CHARACTER SET utf8mb4"))
        self.url = server.set(database=self._name).render_as_string(hide_password=False)
        upgrade_schema(self.url)
        self.engine = sa.create_engine(self.url, poolclass=sa.NullPool)
        self._api: Any = None

    def teardown(self) -> None:
        super().teardown()
        with self._admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{self._name}`"))
        self._admin.dispose()

    def load(self, plan: populate.Plan) -> None:
        populate.goatbeat_mysql(self.engine, plan)

    def shards_shared(self, replicas: int, shards: int) -> bool:
        raise NotImplementedError("the shards scenario runs on PostgreSQL only")

    def _store(self) -> Any:
        from goatbeat_celery.store.mysql import MySQLStore

        return MySQLStore(self.url)
