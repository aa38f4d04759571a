"""kombu's database transport (``sqla+…``) made ready before a worker and a beat share it.

kombu creates a queue's row the first time a process declares it, guarded by a lock that
only its own threads see: a worker and a beat started together on a new broker database both
insert it, and the loser's unique-constraint error stops a worker for good ("Unrecoverable
error"). ``celery goatbeat migrate`` declares the app's queues first, one process, so neither
later start inserts anything.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from sqlalchemy.exc import IntegrityError

log = logging.getLogger(__name__)

#: ``Transport.driver_name`` of kombu's SQLAlchemy transport.
SQL_TRANSPORT = "sqlalchemy"


def prepare(app: Any) -> list[str]:
    """Declare ``app``'s task queues on its broker when that broker is kombu's database
    transport, creating its tables; the names declared (none for any other broker).

    Declaring twice is harmless: a row that exists is found, and a row another process
    inserted while this one looked is found on the second try.
    """
    with app.connection_for_write() as connection:
        if getattr(connection.transport, "driver_name", None) != SQL_TRANSPORT:
            return []
    names = sorted(app.amqp.queues)
    for attempt in (1, 2):
        try:
            _declare(app, names)
            break
        except IntegrityError:  # a row inserted between kombu's look and its insert
            if attempt == 2:
                raise
            log.info("another process declared a broker queue at the same time; declaring "
                     "again", extra={"action": "sql_broker_declare_raced"})
    return names


def _declare(app: Any, names: list[str]) -> None:
    # A connection of its own each time: kombu's session is unusable after a failed insert.
    with app.connection_for_write() as connection, warnings.catch_warnings():
        # kombu's models use a loader SQLAlchemy 2.1 deprecates: nothing the operator can fix.
        warnings.filterwarnings("ignore", "The ``noload`` loader strategy is deprecated")
        channel = connection.default_channel
        for name in names:
            app.amqp.queues[name](channel).declare()
