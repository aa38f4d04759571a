"""API tokens: who may use the HTTP API, for what, and on which schedules.

A token has a name (who it was given to: ``ci``, ``team-a-deploys``), scopes (``read``,
``write``, ``run``) and an optional name prefix: a token limited to ``team-a-`` sees and
touches only the schedules, backfills and calendars whose name starts with it. Its secret is
shown once, when it is made; only its SHA-256 digest is stored. A secret is 32 random bytes,
so a fast digest is enough: nothing short enough to guess is ever hashed.
"""

from __future__ import annotations

import enum
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from goatbeat_celery.core.types.audit import MAX_ACTOR_LENGTH
from goatbeat_celery.core.types.problems import Problem, listed
from goatbeat_celery.core.types.validation import name_problems, nul_problem, shown_value

#: Every secret starts so: a leaked one is recognisable in a log or a scanner's rules.
SECRET_PREFIX = "gbt_"
#: A change made with a token is recorded in the audit log as made by ``token:<name>``.
ACTOR_PREFIX = "token:"
MAX_TOKEN_NAME_LENGTH = MAX_ACTOR_LENGTH - len(ACTOR_PREFIX)


class Scope(str, enum.Enum):
    """What a token may do: ``read`` (list, get, history, backfills, calendars), ``write``
    (create, update, pause, resume, delete schedules and calendars), ``run`` (run now,
    start and cancel backfills, set a one-time run due soon: they send tasks on demand)."""

    READ = "read"
    WRITE = "write"
    RUN = "run"


@dataclass(frozen=True)
class ApiToken:
    """A stored token, without its secret."""

    name: str
    scopes: frozenset[Scope]
    #: Only names starting with it; None: every name.
    prefix: str | None = None
    created_at: datetime | None = None
    #: When it was revoked; a revoked token is refused and stays listed.
    revoked_at: datetime | None = None

    def allows(self, scope: Scope) -> bool:
        return self.revoked_at is None and scope in self.scopes

    def covers(self, name: str) -> bool:
        """Whether ``name`` (a schedule's or a calendar's) is within this token's prefix."""
        return self.prefix is None or name.startswith(self.prefix)

    @property
    def actor(self) -> str:
        """Who a change made with this token is recorded as."""
        return ACTOR_PREFIX + self.name


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def secret_digest(secret: str) -> str:
    """What is stored of a secret, and looked up by."""
    return hashlib.sha256(secret.encode()).hexdigest()


def read_scopes(value: object, label: str, problems: list[Problem]) -> frozenset[Scope]:
    """Scopes from ``"read,write"`` or a list of names; problems appended for unknown ones."""
    words = value.split(",") if isinstance(value, str) else value
    if not isinstance(words, (list, tuple, set, frozenset)):
        problems.append(Problem(label, f"expected scope names, got {shown_value(value)}",
                                "give some of: read, write, run"))
        return frozenset()
    found: set[Scope] = set()
    for word in words:
        try:
            found.add(Scope(word.strip() if isinstance(word, str) else word))
        except ValueError:
            problems.append(Problem(label, f"unknown scope {shown_value(word)}",
                                    "use read, write or run"))
    if not found and not problems:
        problems.append(Problem(label, "no scope given", "give some of: read, write, run"))
    return frozenset(found)


def token_problems(name: object, prefix: object) -> list[Problem]:
    """Problems of a new token's name and prefix (a prefix is text a name may start with)."""
    found = name_problems(name)
    if not found and isinstance(name, str) and len(name) > MAX_TOKEN_NAME_LENGTH:
        found.append(Problem("name", f"{len(name)} characters",
                             f"at most {MAX_TOKEN_NAME_LENGTH} are allowed (the audit log "
                             f"records its changes as {ACTOR_PREFIX}NAME)"))
    if prefix is not None:
        if not isinstance(prefix, str) or not prefix:
            found.append(Problem("prefix", f"expected non-empty text, got {shown_value(prefix)}",
                                 "leave it out for a token over every name"))
        else:
            found.extend(listed(nul_problem(prefix, "prefix")))
            found.extend(name_problems(prefix, "prefix"))
    return found
