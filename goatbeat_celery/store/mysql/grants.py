"""What the MySQL / MariaDB user goatbeat connects as holds, read from ``SHOW GRANTS``
(store.privileges asks it on behalf of ``check`` and ``health``).

MySQL has no ``has_table_privilege``: the grants of the current user are listed by the server
as ``GRANT`` statements, and those of each role granted to it by ``SHOW GRANTS FOR`` the role.
A privilege is held when a grant gives it (or ``ALL PRIVILEGES``) globally (``*.*``), on the
database (a database grant's name may hold ``%`` and ``_`` wildcards), on the table, or, for a
column privilege, on each column. A role whose grants the user may not read leaves what it
gives unknown: :class:`Unverified` is raised rather than a privilege reported missing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from goatbeat_celery.store.errors import Unverified

#: ``GRANT <privileges> ON [TABLE] <target> TO ...``; ``GRANT <roles> TO ...`` has no ``ON``.
_ON = re.compile(r"^GRANT (?P<privileges>.+?) ON (?:TABLE )?(?P<target>(?:`[^`]*`|[^\s.`]+|\*)"
                 r"\.(?:`[^`]*`|[^\s`]+|\*)) TO ", re.IGNORECASE)
_ROLES = re.compile(r"^GRANT (?P<roles>.+?) TO ", re.IGNORECASE)


@dataclass(frozen=True)
class Grant:
    """One ``ON`` grant: privileges (upper case; a column privilege as ``UPDATE`` with its
    columns) on a database (``*``: every one) and a table (``*``: every one)."""

    privileges: frozenset[str]
    columns: dict[str, frozenset[str]]
    database: str
    table: str

    def covers(self, database: str, table: str) -> bool:
        if self.database == "*":
            return True
        if self.table == "*":
            return _like(self.database, database)
        return self.database == database and self.table == table

    def gives(self, privilege: str, database: str, table: str,
              column: str | None = None) -> bool:
        if not self.covers(database, table):
            return False
        if {"ALL", "ALL PRIVILEGES", privilege} & self.privileges:
            return True
        return column is not None and self.table != "*" and column in self.columns.get(
            privilege, frozenset())


def _like(pattern: str, name: str) -> bool:
    """Whether a database grant's name (``%`` and ``_`` wildcards, ``\\`` escapes) matches."""
    regex, index = "", 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            regex += re.escape(pattern[index + 1])
            index += 2
            continue
        regex += ".*" if char == "%" else "." if char == "_" else re.escape(char)
        index += 1
    return re.fullmatch(regex, name) is not None


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def _split(text: str) -> list[str]:
    """``a, b (x, y), c`` at the commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return [part for part in parts if part]


def parse(line: str) -> Grant | list[str] | None:
    """One line of ``SHOW GRANTS``: a :class:`Grant`, the roles a role grant names, or None
    (``PROXY`` and anything else that gives no table privilege)."""
    found = _ON.match(line)
    if found is None:
        roles = _ROLES.match(line)
        return None if roles is None else [_role(r) for r in _split(roles.group("roles"))]
    database, _, table = _target(found.group("target"))
    privileges: set[str] = set()
    columns: dict[str, frozenset[str]] = {}
    for item in _split(found.group("privileges")):
        name, _, listed = item.partition("(")
        name = " ".join(name.split()).upper()
        if listed:
            columns[name] = frozenset(_unquote(c.strip()) for c in listed.rstrip(")").split(","))
        else:
            privileges.add(name)
    if "PROXY" in privileges:
        return None
    return Grant(frozenset(privileges), columns, database, table)


def _target(text: str) -> tuple[str, str, str]:
    parts = re.findall(r"`(?:[^`]|``)*`|[^.`]+|\*", text)
    database, table = (parts + ["*", "*"])[:2]
    return _unquote(database), ".", _unquote(table)


def _role(text: str) -> str:
    """A role as ``SHOW GRANTS FOR`` takes it: ```r``` or ```r```@```h```."""
    return text.strip()


def grants(conn: sa.Connection) -> list[Grant]:
    """Every ``ON`` grant of the connected user and of the roles granted to it, followed
    through roles of roles. Raises :class:`Unverified` when a role's grants cannot be read."""
    found: list[Grant] = []
    todo: list[str | None] = [None]
    seen: set[str] = set()
    while todo:
        role = todo.pop()
        statement = "SHOW GRANTS" if role is None else f"SHOW GRANTS FOR {role}"
        try:
            lines = [row[0] for row in conn.exec_driver_sql(statement)]
        except sa.exc.DBAPIError as exc:
            raise Unverified(
                f"the grants of role {role} cannot be read by this user ({exc.orig}): what "
                "it gives is not verified") from exc
        for line in lines:
            parsed = parse(line)
            if isinstance(parsed, Grant):
                found.append(parsed)
            elif parsed:
                for name in parsed:
                    if name not in seen:
                        seen.add(name)
                        todo.append(name)
    return found


def lacking(found: Sequence[Grant], database: str, table: str, privilege: str) -> bool:
    """Whether none of ``found`` gives ``privilege`` on ``table`` (``"UPDATE (a, b)"``: on
    each column named)."""
    name, _, listed = privilege.partition(" (")
    if listed:
        return not all(any(g.gives(name, database, table, column.strip()) for g in found)
                       for column in listed.rstrip(")").split(","))
    return not any(g.gives(name, database, table) for g in found)


__all__ = ["Grant", "grants", "lacking", "parse"]
