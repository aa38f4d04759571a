"""The tag index: the ``goatbeat_schedule_tag`` table, filled from ``goatbeat_schedule.tags``
and kept in step with it by triggers.

Revision ID: 0008
Revises: 0007
Create Date: 2027-05-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None

# Types spelled out here (not imported from the live schema) so this revision never changes.
IDENTIFIER = (sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
              # A key MySQL can index (255 utf8mb4 characters: 1020 of its 3072 bytes), in
              # code-point order as "C" sorts.
              .with_variant(sa.String(255, collation="utf8mb4_bin"), "mysql", "mariadb"))

# The entries of a schedule are the distinct strings of its tags column when that holds a JSON
# array; anything else there (which the store reads as damage) has none. Triggers, not the
# store, write them: a replica of the previous release, which knows nothing of this table,
# keeps it right while a rolling upgrade runs, and so does an operator's SQL.
PG_FUNCTION = """
CREATE FUNCTION goatbeat_schedule_tag_sync() RETURNS trigger
LANGUAGE plpgsql
-- As the tables' owner: the previous release's role, not yet granted this table, still writes
-- schedules during the rollout. Its search path is the tables' schema only (pg_temp last).
SECURITY DEFINER SET search_path = {schema}, pg_temp
AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        -- DELETE: TRUNCATE fails on a table the same statement truncates.
        DELETE FROM goatbeat_schedule_tag;
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM goatbeat_schedule_tag WHERE schedule_name = OLD.name;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        -- Entries a schedule of the same name left (say, removed by hand) are not its own.
        DELETE FROM goatbeat_schedule_tag WHERE schedule_name = NEW.name;
    END IF;
    IF TG_OP <> 'DELETE' AND json_typeof(NEW.tags) = 'array' THEN
        INSERT INTO goatbeat_schedule_tag (schedule_name, tag)
        SELECT DISTINCT NEW.name, element #>> '{{}}'
        FROM json_array_elements(NEW.tags) AS element
        WHERE json_typeof(element) = 'string';
    END IF;
    RETURN NULL;
END
$$
"""
PG_TRIGGERS = {
    "goatbeat_schedule_tag_sync":
        "AFTER INSERT OR DELETE OR UPDATE OF name, tags ON goatbeat_schedule FOR EACH ROW",
    "goatbeat_schedule_tag_truncate": "AFTER TRUNCATE ON goatbeat_schedule",
}
PG_BACKFILL = """
INSERT INTO goatbeat_schedule_tag (schedule_name, tag)
SELECT DISTINCT s.name, element #>> '{}'
FROM goatbeat_schedule AS s
CROSS JOIN LATERAL json_array_elements(
    CASE WHEN json_typeof(s.tags) = 'array' THEN s.tags END) AS element
WHERE json_typeof(element) = 'string'
"""

# SQLite does not check that a JSON column holds JSON: the nested CASE keeps json_each from
# failing (and the write with it) on text that is not a JSON array.
SQLITE_ENTRIES = """
SELECT {row}.name, value FROM {tables}json_each(
    CASE WHEN json_valid({row}.tags) THEN
        CASE WHEN json_type({row}.tags) = 'array' THEN {row}.tags END END)
WHERE type = 'text'
"""
SQLITE_INSERT = "INSERT OR IGNORE INTO goatbeat_schedule_tag (schedule_name, tag) "
SQLITE_FORGET = "DELETE FROM goatbeat_schedule_tag WHERE schedule_name = {row}.name;"
SQLITE_INDEX_NEW = (SQLITE_FORGET.format(row="NEW") + SQLITE_INSERT
                    + SQLITE_ENTRIES.format(row="NEW", tables="") + ";")
SQLITE_TRIGGERS = {
    "goatbeat_schedule_tag_insert": ("AFTER INSERT", SQLITE_INDEX_NEW),
    "goatbeat_schedule_tag_update": ("AFTER UPDATE OF name, tags",
                                     SQLITE_FORGET.format(row="OLD") + SQLITE_INDEX_NEW),
    "goatbeat_schedule_tag_delete": ("AFTER DELETE", SQLITE_FORGET.format(row="OLD")),
}

# MySQL and MariaDB (10.6 and later: JSON_TABLE): one trigger per event, no TRUNCATE trigger
# (TRUNCATE is no DML there). Only the array's string elements, by their position.
MYSQL_ENTRIES = """
SELECT DISTINCT {row}.name, j.tag FROM {tables}JSON_TABLE(
    CASE WHEN JSON_TYPE({row}.tags) = 'ARRAY' THEN {row}.tags ELSE '[]' END,
    '$[*]' COLUMNS (n FOR ORDINALITY, tag VARCHAR(255) PATH '$')) AS j
WHERE JSON_TYPE(JSON_EXTRACT({row}.tags, CONCAT('$[', j.n - 1, ']'))) = 'STRING'
"""
MYSQL_INSERT = "INSERT INTO goatbeat_schedule_tag (schedule_name, tag) "
MYSQL_INDEX_NEW = (SQLITE_FORGET.format(row="NEW") + MYSQL_INSERT
                   + MYSQL_ENTRIES.format(row="NEW", tables="") + ";")
MYSQL_TRIGGERS = {
    "goatbeat_schedule_tag_insert": ("AFTER INSERT", MYSQL_INDEX_NEW),
    "goatbeat_schedule_tag_update": ("AFTER UPDATE",
                                     SQLITE_FORGET.format(row="OLD") + MYSQL_INDEX_NEW),
    "goatbeat_schedule_tag_delete": ("AFTER DELETE", SQLITE_FORGET.format(row="OLD")),
}


def upgrade() -> None:
    op.create_table(
        "goatbeat_schedule_tag",
        sa.Column("schedule_name", IDENTIFIER, primary_key=True),
        sa.Column("tag", IDENTIFIER, primary_key=True),
    )
    op.create_index("ix_goatbeat_schedule_tag_tag", "goatbeat_schedule_tag",
                    ["tag", "schedule_name"])
    bind = op.get_bind()
    # The triggers before the backfill, in one transaction: creating them locks the schedules
    # against writes until the commit, so no row is written between the two unindexed.
    if bind.dialect.name == "postgresql":
        schema = bind.execute(sa.text("SELECT current_schema()")).scalar_one()
        quoted = bind.dialect.identifier_preparer.quote_identifier(schema)
        op.execute(PG_FUNCTION.format(schema=quoted))
        for name, when in PG_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {when} "
                       "EXECUTE FUNCTION goatbeat_schedule_tag_sync()")
        op.execute(PG_BACKFILL)
    elif bind.dialect.name in ("mysql", "mariadb"):
        for name, (when, body) in MYSQL_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {when} ON goatbeat_schedule "
                       f"FOR EACH ROW BEGIN {body} END")
        op.execute(MYSQL_INSERT + MYSQL_ENTRIES.format(row="s", tables="goatbeat_schedule AS s, "))
    else:
        for name, (when, body) in SQLITE_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {when} ON goatbeat_schedule "
                       f"FOR EACH ROW BEGIN {body} END")
        op.execute(SQLITE_INSERT + SQLITE_ENTRIES.format(row="goatbeat_schedule",
                                                         tables="goatbeat_schedule, "))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in PG_TRIGGERS:
            op.execute(f"DROP TRIGGER {name} ON goatbeat_schedule")
        op.execute("DROP FUNCTION goatbeat_schedule_tag_sync()")
    elif op.get_bind().dialect.name in ("mysql", "mariadb"):
        for name in MYSQL_TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    else:
        for name in SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER {name}")
    op.drop_index("ix_goatbeat_schedule_tag_tag", table_name="goatbeat_schedule_tag")
    op.drop_table("goatbeat_schedule_tag")
