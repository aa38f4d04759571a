""""Did you mean": the stored schedule names closest to one that was not found.

Bounded whatever the number of schedules: at most :data:`LOOKUPS` look-ups of names sharing a
prefix with the one typed (the first half of it, then its first character in either case),
each an index range scan of at most :data:`NAMES_PER_LOOKUP` rows, stopping at the first that
gives a close name. A typo in the first character of a long name is not caught; the listing
command is named with the suggestion anyway.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from goatbeat_celery.api import Schedules

#: Rows read by one look-up.
NAMES_PER_LOOKUP = 200
#: Look-ups for one suggestion, at most.
LOOKUPS = 3


def prefixes(name: str) -> list[str]:
    """The prefixes looked up for ``name``, each once, longest first."""
    first = name[:1]
    wanted = (name[:max(1, len(name) // 2)], first, first.swapcase())
    return [prefix for prefix in dict.fromkeys(wanted) if prefix][:LOOKUPS]


def close_names(schedules: Schedules, name: str) -> list[str]:
    """Up to three stored names close to ``name``, closest first (empty when none is)."""
    seen: set[str] = set()
    for prefix in prefixes(name):
        seen.update(s.name for s in schedules.list(prefix=prefix, limit=NAMES_PER_LOOKUP))
        found = difflib.get_close_matches(name, sorted(seen), n=3)
        if found:
            return found
    return []
