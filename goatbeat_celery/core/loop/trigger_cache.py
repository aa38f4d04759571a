"""Triggers built once and shared by the schedules that have the same kind and parameters."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

from goatbeat_celery.core.rules.triggers import Trigger, TriggerRegistry
from goatbeat_celery.core.types.spec import TriggerSpec

TRIGGER_CACHE_SIZE = 4096


class TriggerCache:
    """The triggers a registry builds, by kind and parameters; past ``size`` of them, the least
    recently used is dropped.

    A trigger depends on its kind and parameters only, so schedules sharing them (say thousands
    of "every 60 s") share one object; the key is cheap to build per row.
    """

    def __init__(self, registry: TriggerRegistry, size: int = TRIGGER_CACHE_SIZE) -> None:
        self.registry = registry
        self.size = size
        self._built: OrderedDict[Hashable, Trigger] = OrderedDict()

    def get(self, spec: TriggerSpec) -> Trigger:
        """The trigger of ``spec``; raises ConfigurationError as the registry does."""
        params = spec.params
        key: Hashable
        try:
            key = (spec.kind, *sorted(params.items()))
            hash(key)
        except TypeError:  # a parameter that is a list or dict
            key = (spec.kind, repr(sorted(params.items())))
        built = self._built  # once: clear() may swap it from another thread
        trigger = built.get(key)
        if trigger is None:
            trigger = self.registry.build(spec)
            built[key] = trigger
            if len(built) > self.size:
                built.popitem(last=False)
        else:
            built.move_to_end(key)
        return trigger

    def clear(self) -> None:
        """Forget every trigger built (the registry changed)."""
        self._built = OrderedDict()
