"""Rotation across clusters on the command line: add and edit set the queues and the
handover, show and --json say them, and bad input names the options and stores nothing."""

from __future__ import annotations

from goatbeat_celery.store import Store

from .conftest import Cli, field_lines


def test_add_rotates_over_the_queues_given_and_shows_it(cli: Cli, store: Store) -> None:
    shown = cli.json("add", "reconcile", "billing.reconcile", "--every", "5m",
                     "--rotate", "eu, us", "--rotate-handover")
    spec = store.get_schedule("reconcile").spec
    assert (spec.rotate, spec.rotate_handover) == (("eu", "us"), True)
    assert (shown["rotate"], shown["rotate_handover"]) == (["eu", "us"], True)
    lines = field_lines(cli.ok("show", "reconcile").output)
    assert lines["rotates over"].startswith("eu, us (occurrence k on queue k mod 2")


def test_edit_changes_the_handover_and_removes_the_rotation(cli: Cli, store: Store) -> None:
    cli.ok("add", "reconcile", "billing.reconcile", "--every", "5m", "--rotate", "eu,us",
           "--rotate-handover")
    cli.ok("edit", "reconcile", "--rotate", "eu,us,ap", "--no-rotate-handover")
    spec = store.get_schedule("reconcile").spec
    assert (spec.rotate, spec.rotate_handover) == (("eu", "us", "ap"), False)
    cli.ok("edit", "reconcile", "--rotate-handover")
    cli.ok("edit", "reconcile", "--rotate", "")
    spec = store.get_schedule("reconcile").spec
    assert (spec.rotate, spec.rotate_handover) == ((), False)
    assert "rotates over" not in field_lines(cli.ok("show", "reconcile").output)


def test_bad_rotations_name_their_options_and_store_nothing(cli: Cli, store: Store) -> None:
    result = cli.fails("add", "reconcile", "billing.reconcile", "--every", "5m",
                       "--rotate", "eu,eu,", "--queue", "other")
    for expected in ("--rotate: '' is empty", "--rotate: 'eu' given more than once",
                     "conflicts with rotate"):
        assert expected in result.output, result.output
    assert "--queue" in result.output, result.output
    result = cli.fails("add", "solo", "billing.reconcile", "--every", "5m", "--rotate", "eu",
                       "--rotate-handover")
    assert "--rotate: 1 queue given; name at least two queues" in result.output, result.output
    result = cli.fails("add", "lone", "billing.reconcile", "--every", "5m",
                       "--rotate-handover")
    assert "--rotate-handover: handover needs a rotation" in result.output, result.output
    assert store.list_schedules() == []
