"""The GRANT statements docs/deploying.md gives each role grant what ``check`` requires of it
(goatbeat_celery.store.privileges): a table added to the rule and not to the page, or the
reverse, fails here."""

from __future__ import annotations

import re

from goatbeat_celery.store.privileges import NEEDS, Role
from goatbeat_celery.store.schema import API_TOKEN_TABLE
from tests.docs.blocks import DOCS
from tests.docs.context import sql_statements

_GRANT = re.compile(r"GRANT\s+(?P<privileges>[A-Z][A-Za-z_, ()\s]*?)\s+ON\s+"
                    r"(?P<sequence>SEQUENCE\s+)?(?P<targets>[a-z_,\s]+?)\s+TO\s+(?P<role>\w+)$",
                    re.S)
#: A privilege, with the columns it names (``UPDATE (a, b)``) if any.
_PRIVILEGE = re.compile(r"[A-Z]+(?:\s*\([^)]*\))?")


def documented_grants() -> dict[str, dict[str, set[str]]]:
    """Role → target → privileges, from every ``GRANT … ON <tables or sequences>``."""
    text = (DOCS / "deploying.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sql\n(.*?)```", text, re.S)
    found: dict[str, dict[str, set[str]]] = {}
    for statement in (s for block in blocks for s in sql_statements(block)):
        match = _GRANT.match(statement)
        if match is None or "SCHEMA" in statement:
            continue
        privileges = {re.sub(r"\s*\(\s*", " (", " ".join(p.split())).replace(" )", ")")
                      for p in _PRIVILEGE.findall(match["privileges"])}
        for target in (t.strip() for t in match["targets"].split(",")):
            found.setdefault(match["role"], {}).setdefault(target, set()).update(privileges)
    return found


def needed(role: Role) -> dict[str, set[str]]:
    return {target: set(privileges) for target, privileges in NEEDS[role].items()}


def test_the_beat_role_is_granted_what_check_requires_and_the_web_role_its_tokens() -> None:
    granted = documented_grants()["beat_runtime"]
    # The same role serves the dashboard, which alone reads the API tokens.
    web = granted.pop(API_TOKEN_TABLE)

    assert granted == needed(Role.BEAT)
    assert web == {"SELECT", "INSERT", "UPDATE"}


def test_the_worker_role_is_granted_what_check_requires() -> None:
    assert documented_grants()["beat_worker"] == needed(Role.WORKER)
