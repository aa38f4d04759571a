"""What each role needs of the database, and what the connected role lacks.

Written once here: ``check`` reports what is missing before beat or a worker starts, and
``health`` says why a replica cannot lead. docs/deploying.md's ``GRANT`` statements grant
exactly this (a test compares them).

On PostgreSQL each privilege is asked of the server with ``has_table_privilege``,
``has_column_privilege`` (a privilege on named columns, ``"UPDATE (a, b)"``: each of them) and
``has_sequence_privilege``, for the role the URL connects as: the server answers from the
same grants it enforces (direct, through a role's membership, or to ``PUBLIC``), every
privilege in one statement, without writing a row. MySQL and MariaDB answer no such question:
there the user's grants (and its roles') are read with ``SHOW GRANTS`` and matched against what
each role needs (:mod:`goatbeat_celery.store.mysql.grants`); its tables number their rows with
``AUTO_INCREMENT``, so no sequence is needed. A write tried and rolled back would have
to take row locks on the live lease and schedules, fire the tag triggers and notify the
replicas, and would stop at the first refusal instead of listing every one. On SQLite the
one privilege is the operating system's: the file and its directory writable by this user.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from goatbeat_celery.core.rules.runs import RUN_COLUMNS
from goatbeat_celery.migrations import VERSION_TABLE
from goatbeat_celery.store.errors import Unverified, translated
from goatbeat_celery.store.schema import (
    ALERT_TABLE,
    AUDIT_TABLE,
    BACKFILL_TABLE,
    CALENDAR_TABLE,
    EXECUTION_TABLE,
    LEASE_TABLE,
    OUTBOX_TABLE,
    SCHEDULE_TABLE,
    SCHEDULE_TAG_TABLE,
)
from goatbeat_celery.store.url import mask_url

__all__ = ["NEEDS", "Missing", "Role", "Unverified", "missing_privileges"]


class Role(str, enum.Enum):
    """Who connects: beat and the CLI (``beat``), or workers that track runs (``worker``)."""

    BEAT = "beat"
    WORKER = "worker"


_ALL = ("SELECT", "INSERT", "UPDATE", "DELETE")
#: The privileges each role needs, by table (or sequence: ``USAGE``). Row locks (``FOR
#: SHARE``, ``FOR UPDATE``) need ``UPDATE``; ``LISTEN`` and ``NOTIFY`` need none.
NEEDS: dict[Role, dict[str, tuple[str, ...]]] = {
    Role.BEAT: {
        **dict.fromkeys((SCHEDULE_TABLE, EXECUTION_TABLE, LEASE_TABLE, BACKFILL_TABLE,
                         CALENDAR_TABLE, AUDIT_TABLE, ALERT_TABLE, OUTBOX_TABLE), _ALL),
        f"{BACKFILL_TABLE}_id_seq": ("USAGE",),
        f"{AUDIT_TABLE}_id_seq": ("USAGE",),
        f"{ALERT_TABLE}_id_seq": ("USAGE",),
        SCHEDULE_TAG_TABLE: ("SELECT",),
        VERSION_TABLE: ("SELECT",),
    },
    # A worker writes its runs' reports and nothing else of an execution (a claim's state or
    # key would let it make beat send a run again, or skip one).
    Role.WORKER: {
        EXECUTION_TABLE: ("SELECT", f"UPDATE ({', '.join((*RUN_COLUMNS, 'settled'))})"),
        VERSION_TABLE: ("SELECT",),
    },
}


@dataclass(frozen=True, kw_only=True)
class Missing:
    """Privileges a role lacks on one object (a table, a sequence, or on SQLite a file)."""

    privileges: tuple[str, ...]
    target: str
    role: str
    #: ``table``, ``sequence``, ``file``, or ``absent`` (not in the schema yet: migrate).
    kind: str = "table"

    def __str__(self) -> str:
        return f"{self.role} lacks {', '.join(self.privileges)} on {self.kind} {self.target}"

    @property
    def fix(self) -> str:
        """The statement (or, for a file, the change) that gives what is missing."""
        if self.kind == "file":
            return f"make {self.target} writable by {self.role}"
        on = "SEQUENCE " if self.kind == "sequence" else ""
        return f"GRANT {', '.join(self.privileges)} ON {on}{self.target} TO {self.role};"


def missing_privileges(engine: sa.Engine, role: Role) -> list[Missing]:
    """What the role ``engine`` connects as lacks of what ``role`` needs (empty: nothing); a
    table or sequence the schema does not have yet is missing as ``kind="absent"``.
    Raises StoreError (StoreUnavailable when the database cannot be reached)."""
    if engine.dialect.name == "sqlite":
        return _sqlite_missing(engine)
    if engine.dialect.name in ("mysql", "mariadb"):
        return _mysql_missing(engine, role)
    if engine.dialect.name != "postgresql":
        return []
    needs = [(target, privilege) for target, privileges in NEEDS[role].items()
             for privilege in privileges]
    # A table the schema lacks answers None (the schema check reports it), not an error.
    probes = [sa.case((sa.func.to_regclass(target).is_(None), None),
                      else_=_held(target, privilege)) for target, privilege in needs]
    with translated("read privileges", mask_url(engine.url)), engine.connect() as conn:
        user = conn.execute(sa.select(sa.func.current_user())).scalar_one()
        answers = conn.execute(sa.select(*probes)).one()
    lacking: dict[str, list[str]] = {}
    absent: dict[str, list[str]] = {}
    for (target, privilege), held in zip(needs, answers, strict=True):
        if not held:
            (absent if held is None else lacking).setdefault(target, []).append(privilege)
    return [*(Missing(privileges=tuple(privileges), target=target, role=str(user),
                      kind="absent") for target, privileges in absent.items()),
            *(Missing(privileges=tuple(privileges), target=target, role=str(user),
                      kind="sequence" if target.endswith("_id_seq") else "table")
              for target, privileges in lacking.items())]


def _held(target: str, privilege: str) -> sa.ColumnElement[bool]:
    """Whether the connected role holds ``privilege`` on ``target``: on each column it names
    (``"UPDATE (a, b)"``), else on the sequence or the table."""
    name, _, columns = privilege.partition(" (")
    if columns:
        return sa.and_(*(sa.func.has_column_privilege(target, column.strip(), name)
                         for column in columns.rstrip(")").split(",")))
    if target.endswith("_id_seq"):
        return sa.func.has_sequence_privilege(target, privilege)
    return sa.func.has_table_privilege(target, privilege)


def _mysql_missing(engine: sa.Engine, role: Role) -> list[Missing]:
    """:func:`missing_privileges` on MySQL / MariaDB, from ``SHOW GRANTS``. Raises
    :class:`Unverified` when a role's grants are hidden."""
    from goatbeat_celery.store.mysql.grants import grants, lacking

    needs = {target: privileges for target, privileges in NEEDS[role].items()
             if not target.endswith("_id_seq")}
    with translated("read privileges", mask_url(engine.url)), engine.connect() as conn:
        user = conn.execute(sa.text("SELECT CURRENT_USER()")).scalar_one()
        database = conn.execute(sa.text("SELECT DATABASE()")).scalar_one()
        found = grants(conn)
        # The server lists only the tables a user holds something on: a table hidden from
        # it is absent only while the schema is behind (or its revision cannot be read).
        present = set(conn.execute(sa.text(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()"
        )).scalars())
        if VERSION_TABLE in present and not lacking(found, str(database), VERSION_TABLE,
                                                    "SELECT"):
            from goatbeat_celery.migrations import current_revision, head_revision

            if current_revision(conn) == head_revision():
                present = set(needs)
    name, _, host = str(user).rpartition("@")
    grantee = f"'{name}'@'{host}'"
    missing: list[Missing] = []
    for target, privileges in needs.items():
        if target not in present:
            missing.append(Missing(privileges=privileges, target=target, role=grantee,
                                   kind="absent"))
            continue
        lacks = tuple(p for p in privileges if lacking(found, str(database), target, p))
        if lacks:
            missing.append(Missing(privileges=lacks, target=target, role=grantee))
    return missing


def _sqlite_missing(engine: sa.Engine) -> list[Missing]:
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return []
    path = Path(database)
    # Writing needs the file, and its directory for the journal SQLite keeps beside it.
    found = [target for target in (path, path.parent or Path("."))
             if target.exists() and not os.access(target, os.W_OK)]
    return [Missing(privileges=("write",), target=str(target), role=f"uid {os.getuid()}",
                    kind="file") for target in found]
