"""``goatbeat check`` reads webhook URLs as beat does: a bad one is a problem naming its entry,
all of them at once, never a traceback (and beat refuses them the same way, at start)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from goatbeat_celery.config import load
from goatbeat_celery.core.types.errors import ConfigurationError

SECRET = "whsec-check-0123456789"
BAD = ["http://receiver.example:99999/XXXXsecretXXXX", "http://[::1/XXXXsecretXXXX",
       {"url": "gopher://receiver.example/XXXXsecretXXXX"}, "https:///XXXXsecretXXXX"]
EXPECTED = ["goatbeat_webhooks[0]: has an invalid port",
            "goatbeat_webhooks[1]: is not a valid URL (its host cannot be read)",
            "goatbeat_webhooks[2].url: must be an http:// or https:// URL, got a gopher one",
            "goatbeat_webhooks[3]: has no host"]


def test_check_lists_every_bad_webhook_url_without_a_traceback(cli_for: Any,
                                                               tmp_path: Path) -> None:
    cli = cli_for(f"sqlite:///{tmp_path / 'goatbeat.sqlite3'}", goatbeat_webhooks=BAD,
                  goatbeat_webhook_secret=SECRET)
    result = cli.fails("check")

    for expected in EXPECTED:
        assert expected in result.output, result.output
    assert "Traceback" not in result.output
    assert "XXXXsecretXXXX" not in result.output and SECRET not in result.output


def test_beat_refuses_a_bad_webhook_url_at_start_with_every_problem() -> None:
    app = Celery("webhooks", broker="memory://", set_as_current=False)
    app.conf.update(goatbeat_database_url="memory://", goatbeat_webhooks=BAD,
                    goatbeat_webhook_secret=SECRET)
    with pytest.raises(ConfigurationError) as refused:
        load(app)  # what the scheduler reads at start: a problem list, not a ValueError
    text = "\n".join(refused.value.problems)
    for expected in EXPECTED:
        assert expected in text, text
