"""The JSON document a request of the API sends, read and checked before any handler sees it.

What no field may hold is refused here, each problem naming its field: a NUL character (no
database column stores one), a lone surrogate, and lists and objects nested deeper than
:data:`~goatbeat_celery.core.rules.validation.MAX_NESTING` (the rules of
:func:`~goatbeat_celery.core.rules.validation.json_shape_problem`, which args, kwargs and
options meet again when a schedule is validated). Nothing here recurses, so a document of any
depth is answered with a problem.
"""

from __future__ import annotations

import json
from typing import Any

from goatbeat_celery.core.rules.validation import MAX_NESTING, json_shape_problem
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.web.api.problem import ApiProblem


def read_document(raw: bytes) -> dict[str, Any]:
    """The JSON object ``raw`` holds; 400 for what is not one, 422 naming each field that
    holds what no field may."""
    try:
        body = json.loads(raw)
    except RecursionError as exc:
        raise ApiProblem(400, "Unreadable JSON", "the body nests lists and objects deeper "
                         f"than its fields may ({MAX_NESTING} levels)") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiProblem(400, "Unreadable JSON", f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiProblem(400, "JSON object expected",
                         f"the body must be a JSON object, not {type(body).__name__}")
    problems: list[Problem] = []
    for key, value in body.items():
        shape = json_shape_problem(value, key) or json_shape_problem(key, key)
        problems.extend([shape] if shape is not None else _nul_problems(key, value))
    if problems:
        raise ApiProblem(422, "Invalid input", "the body holds what no field may; nothing was "
                         "changed", tuple(problems))
    return body


def _nul_problems(key: str, value: Any) -> list[Problem]:
    """A problem for each place under ``key`` holding a NUL character, in a text or a key."""
    found: list[Problem] = []
    stack: list[tuple[str, Any]] = [(key, value)]
    if "\x00" in key:
        return [_nul(key)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            found.append(_nul(path))
        elif isinstance(item, dict):
            for name, child in item.items():
                where = f"{path}.{name}"
                if "\x00" in name:
                    found.append(_nul(where))
                else:
                    stack.append((where, child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{index}]", child) for index, child in enumerate(item))
    return sorted(found, key=lambda problem: problem.field)


def _nul(path: str) -> Problem:
    return Problem(path, "holds a NUL character (U+0000), which no stored text can hold",
                   "remove it")
