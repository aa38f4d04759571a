"""``signature_problems``: every way a call does not fit a signature, each naming its field;
none when Python would bind the call."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goatbeat_celery.core.rules.arguments import signature_problems


def f_plain(a: Any, b: Any = 1) -> None: ...
def f_var(a: Any, *rest: Any, **extra: Any) -> None: ...
def f_kwonly(a: Any, /, b: Any, *, c: Any, d: Any = 0) -> None: ...
def f_none() -> None: ...


@pytest.mark.parametrize(("function", "args", "kwargs", "fields"), [
    (f_plain, [1], {}, []),
    (f_plain, [], {"a": 1, "b": 2}, []),
    (f_plain, [1, 2, 3], {}, ["args"]),
    (f_plain, [1], {"a": 2}, ["kwargs"]),
    (f_plain, [], {"z": 1}, ["kwargs", "args"]),
    (f_var, [1, 2, 3], {"anything": 1}, []),
    (f_var, [], {}, ["args"]),
    (f_kwonly, [1, 2], {"c": 3}, []),
    (f_kwonly, [1], {"b": 2, "c": 3}, []),
    (f_kwonly, [], {"a": 1, "b": 2, "c": 3}, ["kwargs", "args"]),
    (f_kwonly, [1, 2], {}, ["kwargs"]),
    (f_none, [1], {"x": 1}, ["args", "kwargs"]),
], ids=lambda value: getattr(value, "__name__", None))
def test_each_misfit_is_named_by_its_field(function: Any, args: list[Any],
                                           kwargs: dict[str, Any], fields: list[str]) -> None:
    found = signature_problems("t", inspect.signature(function), args, kwargs)

    assert [p.field for p in found] == fields
    assert all(p.message.count("t(") == 1 for p in found)  # each names the signature


def test_the_signature_is_shown_without_annotations() -> None:
    [problem] = signature_problems("proj.add", inspect.signature(f_plain), [], {})

    assert problem.message == "proj.add(a, b=1) needs 'a', not given"


@settings(max_examples=200, deadline=None)
@given(args=st.lists(st.integers(), max_size=4),
       kwargs=st.dictionaries(st.sampled_from(["a", "b", "c", "d", "rest", "z"]), st.integers(),
                              max_size=4),
       function=st.sampled_from([f_plain, f_var, f_kwonly, f_none]))
def test_problems_are_found_exactly_when_python_refuses_the_call(
        args: list[int], kwargs: dict[str, int], function: Any) -> None:
    signature = inspect.signature(function)
    try:
        signature.bind(*args, **kwargs)
        binds = True
    except TypeError:
        binds = False

    assert (signature_problems("t", signature, args, kwargs) == []) is binds
