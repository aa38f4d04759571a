"""Whether a schedule's ``args`` and ``kwargs`` bind to its task's signature.

A worker calls the task with them; Celery's ``apply_async`` binds them first and raises
TypeError when they do not fit, so a schedule whose arguments the task rejects never runs.
Refused when it is written instead, every misfit at once (``Signature.bind`` stops at the
first), each naming the field and the signature.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence

from goatbeat_celery.core.types.problems import Problem

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def signature_problems(task: str, signature: inspect.Signature, args: Sequence[object],
                       kwargs: Mapping[str, object]) -> list[Problem]:
    """Each way ``task(*args, **kwargs)`` does not fit ``signature``: too many positional
    arguments, a keyword it does not take, a parameter given twice, a required one missing."""
    called = f"{task}{_plain(signature)}"
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in _POSITIONAL]
    var_args = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    var_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    by_keyword = {p.name for p in params
                  if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                inspect.Parameter.KEYWORD_ONLY)}
    found: list[Problem] = []
    if len(args) > len(positional) and not var_args:
        found.append(Problem("args", f"{len(args)} given, {called} takes at most "
                             f"{len(positional)} positional",
                             "give fewer, or name them in kwargs"))
    filled = {p.name for p in positional[:len(args)]}
    for key in kwargs:
        if key in filled and key in by_keyword:
            found.append(Problem("kwargs", f"{key!r} is given in args too, and {called} takes "
                                 "it once", f"remove {key!r} from kwargs or from args"))
        elif key not in by_keyword and not var_kwargs:
            found.append(Problem("kwargs", f"{called} takes no keyword {key!r}",
                                 f"remove {key!r}"))
    missing = [p.name for p in params
               if p.default is inspect.Parameter.empty and p.name not in filled
               and p.kind not in (inspect.Parameter.VAR_POSITIONAL,
                                  inspect.Parameter.VAR_KEYWORD)
               and not (p.name in kwargs and p.name in by_keyword)]
    if missing:
        names = ", ".join(repr(name) for name in missing)
        # A keyword-only parameter can only come from kwargs; any other from either.
        keyword_only = all(signature.parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
                           for name in missing)
        found.append(Problem("kwargs" if keyword_only else "args",
                             f"{called} needs {names}, not given",
                             "give " + ("it" if len(missing) == 1 else "them")
                             + (" in kwargs" if keyword_only else " in args or kwargs")))
    if not found:
        # What the cases above do not foresee, as Python itself judges it.
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:
            found.append(Problem("args", f"{called} does not take these arguments ({exc})"))
    return found


def _plain(signature: inspect.Signature) -> str:
    """The signature as a call is judged by it: names, kinds and defaults, no annotations."""
    empty = inspect.Parameter.empty
    return str(signature.replace(
        parameters=[p.replace(annotation=empty) for p in signature.parameters.values()],
        return_annotation=inspect.Signature.empty))
