"""Arguments the registered task's signature rejects are refused when written, naming the
option and the signature, every misfit at once; a task the app does not know is not checked."""

from __future__ import annotations

from pathlib import Path

from goatbeat_celery.store import Store

from .conftest import Cli

TASKS_MODULE = '''\
from {app_module} import app


@app.task(name="proj.tasks.report", shared=False)
def report(day, *, fmt="pdf"):
    return day


@app.task(name="proj.tasks.bound", bind=True, shared=False)
def bound(self, x):
    return x
'''


def with_tasks(cli: Cli, directory: Path) -> None:
    module = f"{cli.module}_sigtasks"
    (directory / f"{module}.py").write_text(TASKS_MODULE.format(app_module=cli.module))
    cli.modules.append(module)
    cli.configure(imports=[module])


def test_add_refuses_arguments_the_task_rejects_naming_each_and_the_signature(
        cli: Cli, store: Store, tmp_path: Path) -> None:
    with_tasks(cli, tmp_path)

    result = cli.fails("add", "report", "proj.tasks.report", "--every", "60",
                       "--args", "[1, 2]", "--kwargs", '{"size": 3, "fmt": "csv"}')

    assert "--args: 2 given, proj.tasks.report(day, *, fmt='pdf') takes at most 1" \
        in result.output
    assert "--kwargs: proj.tasks.report(day, *, fmt='pdf') takes no keyword 'size'" \
        in result.output
    assert store.list_schedules() == []


def test_a_missing_argument_and_another_problem_are_reported_together(
        cli: Cli, store: Store, tmp_path: Path) -> None:
    with_tasks(cli, tmp_path)

    result = cli.fails("add", "report", "proj.tasks.report", "--cron", "61 * * * *")

    assert "--args: proj.tasks.report(day, *, fmt='pdf') needs 'day', not given" \
        in result.output
    assert "--cron" in result.output
    assert store.list_schedules() == []


def test_arguments_that_fit_are_stored_and_a_bound_tasks_self_is_not_counted(
        cli: Cli, store: Store, tmp_path: Path) -> None:
    with_tasks(cli, tmp_path)

    cli.ok("add", "report", "proj.tasks.report", "--every", "60", "--kwargs",
           '{"day": "mon", "fmt": "csv"}')
    cli.ok("add", "bound", "proj.tasks.bound", "--every", "60", "--args", "[1]")

    assert store.get_schedule("report").spec.kwargs == {"day": "mon", "fmt": "csv"}
    assert store.get_schedule("bound").spec.args == (1,)


def test_edit_refuses_a_task_or_arguments_the_stored_ones_do_not_fit(
        cli: Cli, store: Store, tmp_path: Path) -> None:
    with_tasks(cli, tmp_path)
    cli.ok("add", "report", "proj.tasks.report", "--every", "60", "--args", '["mon"]')

    more = cli.fails("edit", "report", "--args", '["mon", "tue"]')
    other = cli.fails("edit", "report", "--task", "proj.tasks.bound", "--kwargs",
                      '{"fmt": "csv"}')

    assert "--args: 2 given, proj.tasks.report(day, *, fmt='pdf') takes at most 1" \
        in more.output
    assert "proj.tasks.bound(x) takes no keyword 'fmt'" in other.output
    assert store.get_schedule("report").spec.args == ("mon",)
    assert store.get_schedule("report").spec.task == "proj.tasks.report"


def test_a_task_the_app_does_not_know_is_not_checked(cli: Cli, store: Store) -> None:
    cli.ok("add", "poll", "feeds.poll", "--every", "60", "--args", "[1, 2, 3]")

    assert store.get_schedule("poll").spec.args == (1, 2, 3)
