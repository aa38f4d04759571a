"""No webhook secret is printed by Celery: not by ``celery report``, not in the answer a worker
gives ``celery inspect conf`` (tests/system/test_webhook_secrets.py asks a real worker), not by
``app.conf.humanize()``: the shared secret, a webhook's own secret, and incoming-webhook URLs,
whose path is a secret too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from celery import Celery
from celery.worker import control

from goatbeat_celery.hidden_settings import hide_secret_settings

SLACK = "https://hooks.slack.example/services/T000/B000/XXXXsecretURL"
SETTINGS = {
    "goatbeat_webhooks": ["https://ops.example/hook?token=XXXXsecretQUERY",
                          {"url": SLACK, "format": "slack", "secret": "XXXXsecretOWN"}],
    "goatbeat_webhook_secret": "XXXXsecretSHARED",
}
SECRETS = ("XXXXsecretURL", "XXXXsecretQUERY", "XXXXsecretOWN", "XXXXsecretSHARED")

APP_MODULE = f'''
from celery import Celery

app = Celery("hidden", broker="memory://")
app.conf.update({SETTINGS!r})
'''


def assert_hidden(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, text
    assert "XXXXsecret" not in text


def test_celery_report_prints_the_webhook_settings_masked(tmp_path: Path) -> None:
    (tmp_path / "hiddenproj.py").write_text(APP_MODULE)
    done = subprocess.run([sys.executable, "-m", "celery", "-A", "hiddenproj", "report"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert_hidden(done.stdout + done.stderr)
    assert "goatbeat_webhooks: '********'" in done.stdout
    assert "goatbeat_webhook_secret: '********'" in done.stdout


def test_the_conf_a_worker_answers_and_humanize_mask_them() -> None:
    hide_secret_settings()
    hide_secret_settings()  # once is enough; again changes nothing
    app = Celery("hidden", broker="memory://", set_as_current=False)
    app.conf.update(SETTINGS, CELERY_GOATBEAT_WEBHOOKS=SETTINGS["goatbeat_webhooks"])
    answer = control.conf(SimpleNamespace(app=app))  # what `celery inspect conf` is sent

    assert_hidden(json.dumps(answer))
    assert answer["goatbeat_webhooks"] == "********"
    assert answer["CELERY_GOATBEAT_WEBHOOKS"] == "********"  # under a namespace too
    assert_hidden(app.conf.humanize())
    # Masked where Celery prints, and intact where goatbeat reads them.
    assert app.conf.goatbeat_webhooks == SETTINGS["goatbeat_webhooks"]
