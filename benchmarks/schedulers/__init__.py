"""The schedulers ``compare.py`` runs side by side, one adapter each (see :class:`Adapter`).

The order here is the order of the table's columns.
"""

from __future__ import annotations

from .base import Adapter, World, log
from .default import CeleryDefault
from .django import DjangoCeleryBeat
from .goatbeat import Goatbeat
from .goatbeat_mysql import GoatbeatMySQL
from .redbeat import RedBeat

ADAPTERS: tuple[type[Adapter], ...] = (Goatbeat, GoatbeatMySQL, CeleryDefault, DjangoCeleryBeat,
                                       RedBeat)
KINDS = tuple(adapter.kind for adapter in ADAPTERS)
#: The kinds run only when ``--only`` names them (they need a server besides PostgreSQL and
#: Redis).
ON_REQUEST = ("goatbeat-mysql",)

__all__ = ["ADAPTERS", "KINDS", "ON_REQUEST", "Adapter", "World", "log"]
