"""What is stored but will not do what the operator likely meant is said on stderr, not refused:
a task the app does not know. (A one-time schedule in the past is refused: test_errors.)"""

from __future__ import annotations

from pathlib import Path

from goatbeat_celery.store import Store

from .conftest import Cli

TASKS_MODULE = '''\
from {app_module} import app


@app.task(name="proj.tasks.report", shared=False)
def report():
    return "done"
'''


def with_tasks(cli: Cli, directory: Path) -> None:
    """A task module the app imports as a worker would (its ``imports`` setting)."""
    module = f"{cli.module}_tasks"
    (directory / f"{module}.py").write_text(TASKS_MODULE.format(app_module=cli.module))
    cli.modules.append(module)
    cli.configure(imports=[module])


# -- unknown tasks --------------------------------------------------------------------------
def test_a_task_the_app_does_not_know_is_stored_with_a_warning(cli: Cli, store: Store) -> None:
    result = cli.ok("add", "poll", "feeds.poll", "--every", "60")

    assert store.get_schedule("poll").spec.task == "feeds.poll"
    assert (f"warning: task 'feeds.poll' is not registered in app {cli.module!r}: stored "
            "anyway") in result.stderr


def test_a_task_from_the_apps_task_modules_gets_no_warning(cli: Cli, tmp_path: Path) -> None:
    with_tasks(cli, tmp_path)

    result = cli.ok("add", "report", "proj.tasks.report", "--every", "60")

    assert "warning" not in result.stderr


def test_a_misspelt_task_is_warned_with_the_closest_name(cli: Cli, tmp_path: Path) -> None:
    with_tasks(cli, tmp_path)

    result = cli.ok("add", "report", "proj.tasks.reprot", "--every", "60")

    assert "task 'proj.tasks.reprot' is not registered" in result.stderr
    assert "(did you mean 'proj.tasks.report'?)" in result.stderr


def test_edit_warns_about_a_new_task_only(cli: Cli, tmp_path: Path) -> None:
    with_tasks(cli, tmp_path)
    cli.ok("add", "report", "proj.tasks.report", "--every", "60")

    unknown = cli.ok("edit", "report", "--task", "proj.tasks.gone")
    other = cli.ok("edit", "report", "--every", "30")

    assert "task 'proj.tasks.gone' is not registered" in unknown.stderr
    assert "not registered" not in other.stderr


def test_task_modules_that_fail_to_import_are_reported_not_fatal(cli: Cli,
                                                                 store: Store) -> None:
    cli.configure(imports=["no_such_module_for_goatbeat"])

    result = cli.ok("add", "poll", "feeds.poll", "--every", "60")

    assert "could not check task 'feeds.poll'" in result.stderr
    assert "no_such_module_for_goatbeat" in result.stderr
    assert store.get_schedule("poll").spec.task == "feeds.poll"
