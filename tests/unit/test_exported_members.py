"""The public surface, pinned: what ``goatbeat_celery`` and ``goatbeat_celery.testing`` export,
and the exception tree errors.py draws.

A name added to or dropped from ``__all__`` is a change users see (an import that starts or
stops working): it fails here until the expected list below is changed with it.
"""

from __future__ import annotations

import inspect
import re
from types import ModuleType

import goatbeat_celery
import goatbeat_celery.testing
from goatbeat_celery.core.types import errors

EXPECTED = [
    "BackfillMode",
    "BackfillNotFound",
    "CalendarInUse",
    "CalendarNotFound",
    "ConfigurationError",
    "ErrorKind",
    "GoatbeatError",
    "LeaseLost",
    "MisfirePolicy",
    "Occurrence",
    "ScheduleConflict",
    "ScheduleNotFound",
    "Scheduler",
    "Schedules",
    "SchemaOutOfDate",
    "StoreError",
    "StoreTimeout",
    "StoreUnavailable",
    "occurrence_of",
    "track_runs",
]
EXPECTED_TESTING = [
    "ManualClock",
    "MemoryStore",
    "RecordingObserver",
    "RecordingSubmitter",
    "SubmitCall",
    "build_engine",
]


def public_names(module: ModuleType) -> set[str]:
    """The names a user can import from ``module`` without an underscore: everything bound in
    it but its submodules and ``from __future__ import annotations``."""
    return {name for name, value in vars(module).items()
            if not name.startswith("_") and not inspect.ismodule(value)
            and type(value).__module__ != "__future__"}


def test_the_package_exports_exactly_the_expected_names() -> None:
    assert goatbeat_celery.__all__ == EXPECTED


def test_every_exported_name_exists() -> None:
    for module in (goatbeat_celery, goatbeat_celery.testing):
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert missing == [], module.__name__


def test_every_public_name_of_the_package_is_exported() -> None:
    # Scheduler, Schedules and track_runs are loaded on first use, so they are not in vars()
    # until then.
    assert public_names(goatbeat_celery) <= set(goatbeat_celery.__all__)


def test_the_lazily_loaded_names_are_the_classes_they_name() -> None:
    from goatbeat_celery.api import Schedules
    from goatbeat_celery.beat.scheduler import Scheduler
    from goatbeat_celery.worker.tracking import track_runs

    assert goatbeat_celery.Scheduler is Scheduler
    assert goatbeat_celery.Schedules is Schedules
    assert goatbeat_celery.track_runs is track_runs


def test_the_testing_module_exports_its_doubles_and_the_memory_store() -> None:
    testing = goatbeat_celery.testing
    defined_here = {name for name in public_names(testing)
                    if getattr(getattr(testing, name), "__module__", None) == testing.__name__}

    assert testing.__all__ == EXPECTED_TESTING
    assert defined_here <= set(testing.__all__)


def test_the_exception_tree_drawn_in_errors_is_the_real_one() -> None:
    assert errors.__doc__ is not None
    drawn: dict[str, str | None] = {}
    parents: list[str] = []
    for line in errors.__doc__.splitlines():
        found = re.match(r"^ {4}(?P<lead>[ │]*(?:[├└]── )?)(?P<name>[A-Z]\w+)", line)
        if found is None:
            continue
        depth = len(found["lead"]) // 4
        parents[depth:] = [found["name"]]
        drawn[found["name"]] = parents[depth - 1] if depth else None
    classes = {name: value for name, value in vars(errors).items()
               if inspect.isclass(value) and issubclass(value, errors.GoatbeatError)}

    real = {name: None if cls is errors.GoatbeatError else cls.__mro__[1].__name__
            for name, cls in classes.items()}
    assert drawn == real
