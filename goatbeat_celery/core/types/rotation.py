"""Rotation across clusters: a schedule may name N queues (``rotate``), occurrence k going to
queue k mod N (:mod:`goatbeat_celery.core.rules.rotation`), and may hand an owner's points to
the next queue while nobody consumes the owner's (``rotate_handover``)."""

from __future__ import annotations

from collections.abc import Mapping

from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.validation import shown_value

#: The most queues a schedule rotates over.
MAX_ROTATE = 32
#: The longest queue name (AMQP's limit on a queue name, in characters here).
MAX_QUEUE_NAME = 255


def rotation_problems(rotate: object, handover: object,
                      options: object = None) -> list[Problem]:
    """Every problem of ``rotate`` and ``rotate_handover``: at least two distinct, non-empty
    queue names (printable, no commas: faces list them separated by commas); handover a
    boolean, and only with a rotation; no explicit ``queue`` in ``options`` beside them (both
    would decide where a message goes)."""
    found: list[Problem] = []
    if not isinstance(handover, bool):
        found.append(Problem("rotate_handover", f"expected true or false, got "
                             f"{shown_value(handover)}"))
    if isinstance(rotate, str) or not isinstance(rotate, (list, tuple)):
        found.append(Problem("rotate", f"expected a list of queue names, got "
                             f"{shown_value(rotate)}", "give e.g. ['eu', 'us']"))
        return found
    if not rotate:
        if handover is True:
            found.append(Problem("rotate_handover", "handover needs a rotation",
                                 "name the queues to rotate over in rotate, or drop handover"))
        return found
    if len(rotate) < 2:
        found.append(Problem("rotate", f"{len(rotate)} queue given",
                             "name at least two queues to rotate over (or none)"))
    if len(rotate) > MAX_ROTATE:
        found.append(Problem("rotate", f"{len(rotate)} queues",
                             f"at most {MAX_ROTATE} are allowed"))
    for queue in rotate:
        problem = _queue_problem(queue)
        if problem is not None:
            found.append(Problem("rotate", f"{shown_value(queue)} {problem}",
                                 "give each queue's name as Celery's workers consume it"))
    repeated = sorted({q for q in rotate if isinstance(q, str) and rotate.count(q) > 1})
    if repeated:
        found.append(Problem("rotate", f"{', '.join(map(repr, repeated))} given more than once",
                             "give each queue once"))
    if isinstance(options, Mapping) and options.get("queue") is not None:
        found.append(Problem("options.queue", f"conflicts with rotate ({shown_value(rotate)}): "
                             "both decide the queue", "drop options.queue or rotate"))
    return found


def _queue_problem(queue: object) -> str | None:
    if not isinstance(queue, str):
        return "is not a string"
    if not queue.strip():
        return "is empty"
    if len(queue) > MAX_QUEUE_NAME:
        return f"is longer than {MAX_QUEUE_NAME} characters"
    if "," in queue or not queue.isprintable() or queue != queue.strip():
        return "holds a comma, a control character or surrounding spaces"
    return None
