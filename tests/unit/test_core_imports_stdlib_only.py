"""The core imports nothing outside the standard library (DESIGN §1): drivers live in adapters."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import goatbeat_celery.core

CORE = Path(goatbeat_celery.core.__file__).parent
ALLOWED_OWN_PACKAGE = "goatbeat_celery.core"


def foreign_imports(source: str, filename: str = "<source>") -> list[str]:
    """Modules imported by ``source`` (anywhere in it) that are neither the standard library
    nor ``goatbeat_celery.core``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # ``from . import x`` inside the core stays inside the core; ``from .. import``
                # would climb out of it.
                names = [] if node.level == 1 else [f"{'.' * node.level}{node.module or ''}"]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            inside_core = name == ALLOWED_OWN_PACKAGE or name.startswith(ALLOWED_OWN_PACKAGE + ".")
            if not inside_core and top not in sys.stdlib_module_names:
                found.append(name)
    return found


def test_the_checker_flags_third_party_and_adapter_imports() -> None:
    source = (
        "import os\n"
        "import sqlalchemy.orm\n"
        "from goatbeat_celery.store import memory\n"
        "from goatbeat_celery.core.types.instants import UTC\n"
        "from .. import cron\n"
        "def later():\n"
        "    from celery import Celery\n"
    )

    assert foreign_imports(source) == ["sqlalchemy.orm", "goatbeat_celery.store", "..", "celery"]


def test_the_core_has_modules_to_check() -> None:
    names = {path.relative_to(CORE).with_suffix("").as_posix() for path in CORE.rglob("*.py")}

    assert {"loop/engine", "rules/misfire", "types/spec", "protocols/store",
            "rules/triggers"} <= names


def test_every_core_module_imports_only_the_standard_library() -> None:
    offenders = {
        path.name: imports
        for path in sorted(CORE.rglob("*.py"))
        if (imports := foreign_imports(path.read_text(encoding="utf-8"), str(path)))
    }

    assert offenders == {}
