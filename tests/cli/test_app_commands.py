"""Every command a message suggests names the app given with -A (``<your app>`` without one),
never a placeholder app the operator does not have."""

from __future__ import annotations

import ast
from pathlib import Path

import goatbeat_celery.cli
from goatbeat_celery import display
from goatbeat_celery.store import Store

from .conftest import Cli, field_values, set_aside

CLI_PACKAGE = Path(goatbeat_celery.cli.__file__).parent


def _message_strings(path: Path) -> list[str]:
    """The string constants of a module, docstrings left out (they are documentation)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_message_of_the_cli_names_a_placeholder_app() -> None:
    offenders = {path.name: text for path in sorted(CLI_PACKAGE.glob("*.py"))
                 for text in _message_strings(path) if "-A proj" in text}

    assert offenders == {}


def test_a_suggested_command_names_the_app_as_given() -> None:
    assert display.command_line("web.celery:app", "list") == (
        "celery -A web.celery:app goatbeat list")
    assert display.command_line(None, "migrate") == "celery -A <your app> goatbeat migrate"
    assert display.command_line("my app", "list") == "celery -A 'my app' goatbeat list"


def test_a_missing_schedule_names_the_list_command_of_this_app(cli: Cli) -> None:
    result = cli.fails("show", "nope")

    assert f"`celery -A {cli.module} goatbeat list` shows the schedules" in result.stderr


def test_status_names_the_list_command_of_this_app(cli: Cli, store: Store) -> None:
    names = [f"s{i:02d}" for i in range(11)]
    for name in names:
        cli.ok("add", name, "feeds.poll", "--every", "60")
        set_aside(store, name, "broken")

    lines = field_values(cli.ok("status").stdout)["set aside"]

    assert lines[-1] == (f"and 1 more: `celery -A {cli.module} goatbeat list --set-aside` "
                         "lists them all")
