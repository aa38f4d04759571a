"""A faster ``__init__`` for the frozen dataclasses the leader builds for every due row.

A frozen dataclass's generated ``__init__`` stores each field with ``object.__setattr__``: one
call per field, 33 of them for a :class:`~goatbeat_celery.core.types.spec.ScheduleSpec`, which
made building one cost more than reading its row. :func:`quick_init` gives such a class an
``__init__`` with the same keyword-only signature and defaults that stores every field in one
``__dict__.update``; equality, hashing, ``repr``, ``replace`` and the frozen ``__setattr__``
are the dataclass's own, unchanged.

Binding a few dozen keyword arguments costs more than storing them, and a read that decodes a
row has its fields in a dict already: :func:`quick_new` builds an instance of such a class from
that dict without a call to ``__init__``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")

_MISSING = object()


class _Fields:
    """What :func:`quick_new` needs of a class: the fields it must be given, and the
    factories of the others that have one."""

    __slots__ = ("factories", "post_init", "required")

    def __init__(self, cls: type) -> None:
        found = dataclasses.fields(cls)
        self.required = frozenset(f.name for f in found if f.default is dataclasses.MISSING
                                  and f.default_factory is dataclasses.MISSING)
        self.factories = tuple((f.name, f.default_factory) for f in found
                               if f.default_factory is not dataclasses.MISSING)
        self.post_init = hasattr(cls, "__post_init__")


#: Each :func:`quick_init` class's :class:`_Fields`.
_QUICK: dict[type, _Fields] = {}


def quick_init(cls: type[T]) -> type[T]:
    """``cls`` (a frozen, keyword-only dataclass without slots of its own, every field in
    ``__init__``) with an ``__init__`` that stores its fields at once (those a base keeps in
    slots one by one); ``__post_init__`` is still called."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__}: quick_init takes a frozen dataclass without slots")
    # Fields a base class keeps in its slots are stored one by one, as the dataclass does.
    slotted = {name for base in cls.__mro__[1:] for name in base.__dict__.get("__slots__", ())}
    names: dict[str, Any] = {"_MISSING": _MISSING, "_set": object.__setattr__}
    stores: list[str] = []
    arguments: list[str] = []
    factories: list[str] = []
    items: list[str] = []
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = field.name
        if not field.init or not field.kw_only or not name.isidentifier():
            raise TypeError(f"{cls.__name__}.{name}: quick_init takes keyword-only fields "
                            "set by __init__")
        if field.default is not dataclasses.MISSING:
            names[f"_default_{name}"] = field.default
            arguments.append(f"{name}=_default_{name}")
        elif field.default_factory is not dataclasses.MISSING:
            names[f"_factory_{name}"] = field.default_factory
            arguments.append(f"{name}=_MISSING")
            factories.append(f"    if {name} is _MISSING:\n        {name} = _factory_{name}()\n")
        else:
            arguments.append(name)
        if name in slotted:
            stores.append(f"    _set(self, {name!r}, {name})\n")
        else:
            items.append(f"{name}={name}")
    post_init = "    self.__post_init__()\n" if hasattr(cls, "__post_init__") else ""
    source = (f"def __init__(self, *, {', '.join(arguments)}):\n" + "".join(factories)
              + "".join(stores) + f"    self.__dict__.update({', '.join(items)})\n"
              + post_init)
    exec(source, names)  # noqa: S102 - built from the class's own field names only
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    if not slotted:
        _QUICK[cls] = _Fields(cls)
    return cls


def quick_new(cls: type[T], fields: dict[str, Any]) -> T:
    """An instance of ``cls`` (a :func:`quick_init` class whose bases keep no field in slots)
    with ``fields`` (field name → value), equal to ``cls(**fields)`` but built without binding
    each as a keyword argument: for the objects a read builds for every row.

    A field left out keeps its default without being stored: a dataclass keeps a plain
    default as the class's attribute, which the instance (frozen) reads until it sets its own,
    which it never does; a field with a default factory gets a fresh value. A field without a
    default left out raises TypeError; the names given are not checked against the fields
    (that would cost much of what this saves): each caller's tests check that what it builds
    holds its fields and nothing else (a misspelt name would be stored beside them).
    ``__post_init__`` is called."""
    quick = _QUICK.get(cls)
    if quick is None:
        raise TypeError(f"{cls.__name__}: quick_new takes a class made by quick_init, "
                        "without fields in slots")
    instance: T = object.__new__(cls)
    values = instance.__dict__
    values.update(fields)
    for name, factory in quick.factories:
        if name not in values:
            values[name] = factory()
    if not quick.required <= values.keys():
        missing = ", ".join(sorted(quick.required - values.keys()))
        raise TypeError(f"{cls.__name__}: quick_new was given no value for {missing}")
    if quick.post_init:
        instance.__post_init__()  # type: ignore[attr-defined]
    return instance
