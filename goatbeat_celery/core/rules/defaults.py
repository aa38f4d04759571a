"""A schedule's own value, or the global default when it gives none.

A schedule (or a backfill) leaves a field unset (None) to follow the setting of the same
meaning: the plain fields name theirs (``FieldInfo.default``: ``misfire_grace``, ...), and so
do ``misfire_policy``, ``overlap`` (``goatbeat_overlap_policy``) and a backfill's
``per_tick``. Only None means unset: a value the rules let be falsy (a zero grace) is the
schedule's own.
"""

from __future__ import annotations

from typing import TypeVar

_T = TypeVar("_T")


def own_or_default(own: _T | None, default: _T) -> _T:
    """``own`` unless it is None (unset), then ``default``."""
    return default if own is None else own
