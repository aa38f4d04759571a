"""The schedulers ``compare.py`` runs side by side, one adapter each (see :class:`Adapter`).

The order here is the order of the table's columns.
"""

from __future__ import annotations

from .base import Adapter, World, log
from .default import CeleryDefault
from .django import DjangoCeleryBeat
from .goatbeat import Goatbeat
from .redbeat import RedBeat

ADAPTERS: tuple[type[Adapter], ...] = (Goatbeat, CeleryDefault, DjangoCeleryBeat, RedBeat)
KINDS = tuple(adapter.kind for adapter in ADAPTERS)

__all__ = ["ADAPTERS", "KINDS", "Adapter", "World", "log"]
