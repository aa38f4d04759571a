"""The docs name only what exists, and document everything an operator can set or type.

- every ``goatbeat_*`` name in ``docs/*.md`` is a setting, or a table, header, metric, signal or
  Django management command the code really has; every setting has a row in the configuration
  table, with its real default;
- every ``celery -A … goatbeat …`` command written anywhere in the docs exists with the options
  it is given, and the command reference covers every command and option;
- links between pages lead to pages and headings that exist.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest
from celery import Celery

from goatbeat_celery import config as config_module
from goatbeat_celery import headers as header_names
from goatbeat_celery import signals
from goatbeat_celery.beat.metrics import GoatbeatMetrics
from goatbeat_celery.cli import goatbeat
from goatbeat_celery.migrations import VERSION_TABLE
from goatbeat_celery.store.schema import (
    ALERT_ID_SEQUENCE,
    AUDIT_ID_SEQUENCE,
    BACKFILL_ID_SEQUENCE,
    metadata,
)
from goatbeat_celery.web import security as web_security
from goatbeat_celery.worker.tracking.duplicates import DUPLICATES_METRIC
from tests.docs.blocks import DOCS

PAGES = sorted(DOCS.glob("*.md"))
#: Misspelt on purpose, to show how a typo is reported.
DELIBERATE_TYPOS = {"goatbeat_retension"}
_NAME = re.compile(r"\bgoatbeat_\w+")
_ROW = re.compile(r"^\|\s*`(?P<name>[a-z_]+)`\s*\|(?P<rest>.*)$")


def text(page: str) -> str:
    return (DOCS / page).read_text(encoding="utf-8")


def settings() -> set[str]:
    """Every setting config.py reads, by its app.conf name."""
    keys = (*config_module._SETTINGS_KEYS, *config_module._OWN_KEYS)
    return {config_module.PREFIX + key for key in keys}


def default_of(setting: str) -> Any:
    loaded = config_module.load(Celery("defaults", set_as_current=False)).config
    key = setting.removeprefix(config_module.PREFIX)
    if key in config_module._SETTINGS_KEYS:
        return loaded.settings.as_dict()[key]
    return getattr(loaded, key)


def code_names() -> set[str]:
    """``goatbeat_*`` names the code defines besides settings."""
    from datetime import timedelta

    import prometheus_client

    # With shards, so that the per-shard metrics are registered too, and a reading of the
    # store, so that the schedules' states and the standbys are.
    metrics = GoatbeatMetrics(lease_ttl=timedelta(seconds=30),
                              registry=prometheus_client.CollectorRegistry(),
                              shard_leases=("default.shard-0-of-2", "default.shard-1-of-2"),
                              read_status=lambda: ({}, 0))
    samples = {sample.name for family in metrics.registry.collect() for sample in family.samples}
    families = {family.name for family in metrics.registry.collect()}
    headers = {value for name, value in vars(header_names).items()
               if name.isupper() and isinstance(value, str)}
    signal_names = {getattr(signals, name).name for name in signals.__all__}
    cookies = {web_security.CSRF_COOKIE, web_security.SESSION_COOKIE}
    # The worker's own counter (run tracking), outside beat's registry.
    samples |= {f"{DUPLICATES_METRIC}_total"}
    return ({*metadata.tables, BACKFILL_ID_SEQUENCE, ALERT_ID_SEQUENCE, AUDIT_ID_SEQUENCE,
             VERSION_TABLE,
             "goatbeat_celery"}
            | samples | families | headers | signal_names | management_commands() | cookies)


def management_commands() -> set[str]:
    """The ``manage.py`` commands of goatbeat's Django app, by their file names (Django itself
    need not be importable to list them)."""
    import goatbeat_celery

    commands = (Path(goatbeat_celery.__file__).parent / "contrib" / "django" / "management"
                / "commands")
    return {path.stem for path in commands.glob("goatbeat_*.py")}


def section(page: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same or a higher level."""
    lines = text(page).splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == heading)
    level = len(heading) - len(heading.lstrip("#"))
    end = next((i for i in range(start + 1, len(lines))
                if re.match(rf"^#{{1,{level}}} ", lines[i])), len(lines))
    return "\n".join(lines[start + 1:end])


def table_rows(body: str) -> dict[str, str]:
    return {m.group("name"): m.group("rest") for m in map(_ROW.match, body.splitlines()) if m}


# -- settings ---------------------------------------------------------------------------------
def test_every_goatbeat_name_in_the_docs_exists_in_the_code() -> None:
    known = settings() | code_names() | DELIBERATE_TYPOS
    unknown = {f"{page.name}: {name}" for page in PAGES
               for name in _NAME.findall(page.read_text(encoding="utf-8"))
               if name not in known}

    assert unknown == set(), "names that are not settings, tables, headers, metrics or signals"


def test_every_setting_has_a_row_in_the_configuration_table() -> None:
    rows = table_rows(section("configuration.md", "## Settings"))

    assert set(rows) == settings()


@pytest.mark.parametrize("setting", sorted(settings()))
def test_the_documented_default_of_each_setting_is_its_real_default(setting: str) -> None:
    row = table_rows(section("configuration.md", "## Settings"))[setting]
    cell = row.split("|")[0]
    literal = re.search(r"`([^`]*)`", cell)
    assert literal is not None, f"no default given for {setting}"

    assert ast.literal_eval(literal.group(1)) == default_of(setting)


def test_the_per_entry_options_table_lists_exactly_the_options_config_accepts() -> None:
    rows = table_rows(section("configuration.md", "### Per-entry options"))

    assert set(rows) == config_module._GOATBEAT_ENTRY_KEYS


def test_the_guarantees_table_is_the_readme_s_word_for_word() -> None:
    def guarantees(markdown: str) -> list[str]:
        lines = markdown.splitlines()
        start = lines.index("| layer | guarantee |")
        return lines[start:start + 6]

    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")

    assert guarantees(text("concepts.md")) == guarantees(readme)


# -- the command line -------------------------------------------------------------------------
def documented_commands() -> list[tuple[str, list[str]]]:
    """``(page, argv after "goatbeat")`` of every goatbeat command written in the docs."""
    found = []
    for page in PAGES:
        for line in page.read_text(encoding="utf-8").splitlines():
            # In a table row a cell ends at "|"; in a synopsis "|" separates alternatives.
            stop = "`|" if line.lstrip().startswith("|") else "`"
            match = re.search(rf"celery -A \S+ goatbeat\b(?P<rest>[^{stop}]*)", line)
            if match is None:
                continue
            rest = match.group("rest").split(" || ")[0].split(" # ")[0]
            rest = re.sub(r"(?<!\S)[\[(]|[\])](?!\S)|(?<= )\|(?= )", " ", rest).strip()
            try:
                argv = shlex.split(rest)
            except ValueError:  # an unbalanced quote in prose: take the words as they are
                argv = rest.split()
            found.append((page.name, [word.rstrip(",.;:") for word in argv]))
    return found


def options_of(command: click.Command) -> set[str]:
    names = {"--help"}
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def test_every_documented_goatbeat_command_and_option_exists() -> None:
    problems = []
    commands = documented_commands()
    assert len(commands) > 30, "the pattern no longer finds the commands in the docs"
    for page, argv in commands:
        if not argv or argv[0].startswith("-") or argv[0] in ("…", "..."):
            continue
        command = goatbeat.commands.get(argv[0])
        if command is None:
            problems.append(f"{page}: no command {argv[0]!r}")
            continue
        words = argv[1:]
        default = getattr(command, "default_command", None)
        if isinstance(command, click.Group) and default and (
                not words or words[0] not in command.commands):
            words = [default, *words]  # alerts NAME is alerts list NAME
        if isinstance(command, click.Group) and words and not words[0].startswith("-"):
            # A group's subcommand (calendar add …) takes the options.
            name = f"{argv[0]} {words[0]}"
            command = command.commands.get(words[0])
            if command is None:
                problems.append(f"{page}: no command {name!r}")
                continue
            argv, words = [name], words[1:]
        for word in words:
            option = word.split("=", 1)[0]
            if re.fullmatch(r"--?[a-z][\w-]*", option) and option not in options_of(command):
                problems.append(f"{page}: {argv[0]} has no option {option}")

    assert problems == []


def test_the_command_reference_covers_every_command_and_option() -> None:
    page = text("cli.md")
    missing = []
    commands = dict(goatbeat.commands)
    for group_name, group in goatbeat.commands.items():
        if isinstance(group, click.Group):
            commands.update({f"{group_name} {name}": sub for name, sub in group.commands.items()})
    for name, command in commands.items():
        if " " in name:
            if f"goatbeat {name}" not in page:
                missing.append(name)
                continue
        elif f"`{name}`" not in page:
            missing.append(name)
            continue
        for option in options_of(command) - {"--help"}:
            if option not in page:
                missing.append(f"{name} {option}")

    assert missing == []


# -- links ------------------------------------------------------------------------------------
def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    words = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return words.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    headings = [line.lstrip("#").strip() for line in path.read_text(encoding="utf-8").splitlines()
                if re.match(r"^#{1,6} ", line)]
    return {slug(heading) for heading in headings}


def test_links_between_pages_lead_to_pages_and_headings_that_exist() -> None:
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+://", target):
                continue
            file_part, _, anchor = target.partition("#")
            path = (page.parent / file_part).resolve() if file_part else page
            if not path.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{page.name}: {target} (no such heading)")

    assert broken == []


_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}


def test_the_docs_count_goatbeat_s_tables_as_the_schema_has_them() -> None:
    tables = set(metadata.tables)
    counts = [(page.name, word) for page in PAGES
              for word in re.findall(r"\bits (\w+) tables\b", page.read_text(encoding="utf-8"))]
    assert counts, "no page counts the tables"
    assert [(page, _NUMBERS.get(word)) for page, word in counts] == [
        (page, len(tables)) for page, _ in counts]


def test_the_tables_to_drop_are_all_of_goatbeat_s_tables() -> None:
    sentence = text("migrating.md").split("goatbeat's tables can stay", 1)[1].split(".\n", 1)[0]
    assert set(re.findall(r"`(goatbeat_\w+)`", sentence)) == set(metadata.tables) | {
        VERSION_TABLE}
