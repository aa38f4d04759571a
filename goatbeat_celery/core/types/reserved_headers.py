"""Which message headers a schedule's ``options.headers`` may not set: the message belongs to
Celery and goatbeat.

Celery copies the ``headers`` option over the headers it builds, and its worker reads the
task to run, the task id and the rest from them (and makes every header an attribute of
``Task.request``). A header named like one of those would run another task than the
schedule's (``task``), write a report onto another schedule's run (``id``), hide what ran
(``shadow``), or change when and how it runs (``eta``, ``expires``, ``timelimit``…). So these
are refused when a schedule is written, whatever the face, and dropped from rows written
before they were refused (:func:`without_reserved`):

* Celery's task protocol, version 2 (``celery/app/amqp.py``, ``as_task_v2``), and the fields
  of version 1 its worker still reads (``as_task_v1``, ``hybrid_to_proto2``);
* what Celery's worker puts in a request itself (``reply_to``, ``delivery_info``…) and every
  name of ``celery.app.task.Context``, which a header would replace on ``Task.request``;
* goatbeat's own (:data:`goatbeat_celery.core.types.headers.OWN` and Celery beat's
  ``celery_beat_task``).

AMQP header tables are case-sensitive and Celery reads the names in lower case, but brokers
and client libraries differ in how they treat case: names are refused whatever their case
(``Task`` as ``task``), which costs nothing a schedule needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from goatbeat_celery.core.types.headers import CELERY_BEAT, OWN
from goatbeat_celery.core.types.problems import Problem

#: Celery's task protocol: the headers of version 2, and the fields of version 1 (and of a
#: hybrid message) its worker still reads.
CELERY_PROTOCOL_HEADERS = frozenset({
    # version 2
    "lang", "task", "id", "shadow", "eta", "expires", "group", "group_index", "retries",
    "timelimit", "root_id", "parent_id", "argsrepr", "kwargsrepr", "origin", "ignore_result",
    "replaced_task_nesting", "stamped_headers", "stamps",
    # version 1 and hybrid messages
    "args", "kwargs", "utc", "callbacks", "errbacks", "chord", "chain", "taskset", "meth",
})
#: What Celery's worker sets in a request itself, and the other names of ``Task.request``
#: (``celery.app.task.Context``: attributes and methods), each of which a header replaces.
CELERY_REQUEST_NAMES = frozenset({
    "reply_to", "correlation_id", "hostname", "delivery_info", "properties", "groups",
    "headers", "is_eager", "called_directly", "logfile", "loglevel", "time_limit",
    "soft_time_limit", "children", "get", "update", "clear", "as_execution_options",
    "_children", "_protected", "_get_custom_headers", "_filter_x_death_headers",
})
#: Every header a schedule may not set, in lower case.
RESERVED_HEADERS = frozenset({*CELERY_PROTOCOL_HEADERS, *CELERY_REQUEST_NAMES, *OWN,
                              CELERY_BEAT})


def reserved(name: object) -> bool:
    """Whether ``name`` is a header only Celery or goatbeat may set (in any case)."""
    return isinstance(name, str) and name.lower() in RESERVED_HEADERS


def _owner(name: str) -> str:
    lowered = name.lower()
    if lowered in OWN or lowered == CELERY_BEAT:
        return "goatbeat sets it on every run"
    if lowered in CELERY_PROTOCOL_HEADERS:
        return "it is a header of Celery's task protocol, which Celery sets on every message"
    return "Celery's worker makes it part of the task's request"


def header_problems(headers: Mapping[Any, Any], label: str = "options.headers"
                    ) -> list[Problem]:
    """A problem for each header of ``headers`` a schedule may not set, naming it."""
    return [Problem(f"{label}.{name}", f"{name!r} is refused: {_owner(name)}",
                    "remove it (set the task, its id, eta or limits through the schedule's "
                    "own fields, never through headers)")
            for name in headers if reserved(name)]


def without_reserved(headers: Mapping[Any, Any]) -> tuple[dict[Any, Any], list[str]]:
    """``headers`` without those a schedule may not set, and the names dropped (a row written
    before they were refused)."""
    kept = {name: value for name, value in headers.items() if not reserved(name)}
    return kept, [name for name in headers if reserved(name)]
