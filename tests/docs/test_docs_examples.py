"""The documentation's examples run, and show what really happens.

Every block marked runnable in ``docs/*.md`` (see :mod:`tests.docs.blocks` for the markers) runs
here: Python against a real store (a SQLite file in a temporary directory, or PostgreSQL where
the page is about PostgreSQL), ``celery -A proj goatbeat …`` commands against a small app module
(in this process, through Celery's own ``celery`` command, unless they need a shell), SQL on
PostgreSQL. A command's output must match the output the page shows.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs import output
from tests.docs.blocks import Chain, DocsSyntaxError, chains, page_blocks
from tests.docs.context import ChainRunner, celery_words, sql_statements

pytestmark = pytest.mark.slow


def _collect() -> list[Chain] | DocsSyntaxError:
    try:
        return chains()
    except DocsSyntaxError as exc:
        return exc


COLLECTED = _collect()
CHAINS = COLLECTED if isinstance(COLLECTED, list) else []


def test_the_runnable_examples_are_marked_correctly() -> None:
    if isinstance(COLLECTED, DocsSyntaxError):
        pytest.fail(str(COLLECTED), pytrace=False)
    assert CHAINS, "no runnable examples found in docs/"


@pytest.mark.parametrize("chain", CHAINS, ids=[chain.id for chain in CHAINS])
def test_documented_example_runs_as_shown(chain: Chain, request: pytest.FixtureRequest,
                                          tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ChainRunner(chain, request, tmp_path, monkeypatch).run()


def test_every_page_but_the_map_has_a_runnable_example() -> None:
    # The pages written by other hands (reliability, performance) carry their own checks.
    pages = {"getting-started.md", "concepts.md", "configuration.md", "scheduling.md",
             "deploying.md", "upgrading.md", "migrating.md", "django.md", "troubleshooting.md",
             "cli.md", "web.md", "controls.md"}
    with_examples = {chain.first.page for chain in CHAINS}
    assert pages - with_examples == set()


# -- the runner itself ------------------------------------------------------------------------
def test_markers_find_visible_and_hidden_blocks_with_their_options(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "intro\n\n<!-- test: postgres -->\n```python\nx = 1\n```\n\n"
        "<!-- test: continue\nassert x == 1\n-->\n\n"
        "```python\nnot run\n```\n\n<!-- test: fails -->\n```console\n$ false\n```\n"
    )

    blocks = page_blocks(page)

    assert [(b.line, b.lang, b.code, b.hidden) for b in blocks] == [
        (5, "python", "x = 1", False),
        (9, "python", "assert x == 1", True),
        (18, "console", "$ false", False),
    ]
    found = chains(tmp_path)
    assert [len(chain.blocks) for chain in found] == [2, 1]
    assert found[0].flag("postgres") and found[1].first.flags == {"fails"}


def test_an_unknown_marker_option_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text("<!-- test: postgress -->\n```python\npass\n```\n")

    with pytest.raises(DocsSyntaxError, match="unknown test option 'postgress'"):
        chains(tmp_path)


def test_a_marker_on_an_unrunnable_language_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text("<!-- test -->\n```yaml\na: 1\n```\n")

    with pytest.raises(DocsSyntaxError, match="cannot run a 'yaml' block"):
        chains(tmp_path)


def test_output_matching_ignores_instants_padding_and_measured_durations() -> None:
    shown = ["NAME    NEXT RUN              LATENESS",
             "digest  2026-11-30T06:00:00Z  0.012s"]
    actual = ("NAME    NEXT RUN                  LATENESS\n"
              "digest  2027-01-04T06:00:00.250Z  1.5s\n")

    assert output.matches(shown, actual)
    assert not output.matches(shown, actual.replace("digest", "poll"))


def test_output_matching_takes_ellipsis_within_and_across_lines() -> None:
    assert output.matches(["{", "...", '  "ok": true...', "}"],
                          '{\n  "a": 1,\n  "b": 2,\n  "ok": true, "c": 3\n}\n')
    assert not output.matches(["{", "...", '  "ok": true', "}"], '{\n  "ok": false\n}\n')


def test_sql_blocks_split_into_statements_without_comments() -> None:
    code = "-- roles\nCREATE ROLE a LOGIN;  -- the beat\nGRANT USAGE ON SCHEMA public\n  TO a;\n"

    assert sql_statements(code) == ["CREATE ROLE a LOGIN", "GRANT USAGE ON SCHEMA public\n  TO a"]


def test_only_plain_goatbeat_commands_run_in_this_process() -> None:
    assert celery_words('celery -A proj goatbeat add d mail.digest --cron "0 7 * * *" '
                        """--kwargs '{"limit": 50}'""") == [
        "-A", "proj", "goatbeat", "add", "d", "mail.digest", "--cron", "0 7 * * *",
        "--kwargs", '{"limit": 50}']
    for needs_a_shell in ["celery -A proj goatbeat remove x --yes || echo $?",
                          "celery -A proj goatbeat add w m.d --cron '0 8 * * mon' 2>&1 >/dev/null",
                          'celery -A proj goatbeat show "$NAME"',
                          "celery -A proj goatbeat list | head -3",
                          "celery -A proj beat -S goatbeat_celery.Scheduler",
                          "python -c 'print(1)'"]:
        assert celery_words(needs_a_shell) is None, needs_a_shell


CHECKED_BOTH_WAYS = """\
<!-- test -->
```console
$ celery -A proj goatbeat migrate
...
$ celery -A proj goatbeat add nightly reports.build --cron "0 2 * * *" --json
...
$ celery -A proj goatbeat list
...
$ celery -A proj goatbeat check
...
```

<!-- test: continue fails -->
```console
$ celery -A proj goatbeat show nope
Error: no schedule named 'nope'; `celery -A proj goatbeat list` shows the schedules
```

<!-- test: continue fails -->
```console
$ celery -A proj goatbeat edit nightly --every 5x
...
```
"""


def test_a_command_run_in_this_process_prints_and_exits_as_the_executable(
        tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "page.md").write_text(CHECKED_BOTH_WAYS)
    [chain] = chains(tmp_path)
    runs = []
    for in_process in (True, False):
        directory = tmp_path / f"in_process_{in_process}"
        directory.mkdir()
        runner = ChainRunner(chain, request, directory, monkeypatch, in_process=in_process)
        runner.run()
        runs.append([(text, status, printed.replace(str(directory), "DIR"))
                     for text, status, printed in runner.ran])

    here, executable = runs
    assert [status for _, status, _ in here] == [0, 0, 0, 0, 1, 2]
    # The same lines, but for the instants the store wrote and the times left until them.
    for (text, status, printed), (_, executable_status, executable_printed) in zip(
            here, executable, strict=True):
        assert status == executable_status, text
        assert _masked(printed).splitlines() == _masked(executable_printed).splitlines(), text


def _masked(printed: str) -> str:
    for pattern in (r"\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d)", r"\(in [^)]*\)"):
        printed = re.sub(pattern, "…", printed)
    return printed
