"""What an instance built by ``quick_new`` holds: its fields and nothing else."""

from __future__ import annotations

import dataclasses
from typing import Any


def only_fields(instance: Any) -> None:
    """Every attribute ``instance`` stores is one of its fields: a name a ``quick_new`` caller
    misspelt would be stored beside them, while the field it meant kept its default."""
    names = {f.name for f in dataclasses.fields(instance)}
    assert set(vars(instance)) <= names, set(vars(instance)) - names
