"""Transactions of the application's own that a store's statements join.

An application that keeps goatbeat's tables in its own database, in transactions of its own
(Django's ``transaction.atomic()``), expects a change made through
:class:`~goatbeat_celery.api.Schedules` inside one to commit or roll back with it. The
application registers a :data:`Joiner` (goatbeat's Django app does, when it is ready); a
store asks for one when it is opened, and runs each read and write on the connection it
lends while the application's transaction is open, on its own pool otherwise.

Nothing here imports the application: it registers itself, so that this layer stays below it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

import sqlalchemy as sa

#: While the application's transaction is open, a context in which statements run inside it
#: (in a savepoint of it, so that a refused write undoes only itself): it yields the
#: connection; None while no such transaction is open.
Enclosing = Callable[[], AbstractContextManager[sa.Connection] | None]
#: Given the URL of a store's database, the :data:`Enclosing` of the application's
#: transactions on that same database, or None when the application does not hold it.
Joiner = Callable[[sa.URL], Enclosing | None]

_joiners: list[Joiner] = []


def register(joiner: Joiner) -> None:
    """Make stores opened from now on join the transactions ``joiner`` lends (once each)."""
    if joiner not in _joiners:
        _joiners.append(joiner)


def unregister(joiner: Joiner) -> None:
    if joiner in _joiners:
        _joiners.remove(joiner)


def enclosing_for(url: sa.URL) -> Enclosing | None:
    """The application's transactions on the database ``url`` names, if it registered any."""
    for joiner in _joiners:
        found = joiner(url)
        if found is not None:
            return found
    return None
