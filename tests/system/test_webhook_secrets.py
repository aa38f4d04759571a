"""Any client of the broker may ask a worker for its configuration (``celery inspect conf``):
a real worker answers with goatbeat's webhook settings masked, as ``celery report`` prints them
(tests/webhooks/test_hidden_settings.py)."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from celery import Celery

from tests.support.waiting import wait_for
from tests.system.harness import Cluster

pytestmark = pytest.mark.slow

SLACK = "https://hooks.slack.example/services/T000/B000/XXXXsecretURL"
WEBHOOKS = ["https://ops.example/hook?token=XXXXsecretQUERY",
            {"url": SLACK, "format": "slack", "secret": "XXXXsecretOWN"}]


def test_a_worker_answers_inspect_conf_with_the_webhook_settings_masked(
        cluster: Cluster) -> None:
    cluster.write_config(schedules={}, settings={"webhooks": WEBHOOKS,
                                                 "webhook_secret": "XXXXsecretSHARED"})
    cluster.start_worker()

    # The question goes through the broker as `celery inspect conf` sends it; the answer is
    # what the worker chose to send.
    client = Celery("asker", broker=f"{cluster.broker_url}/0", set_as_current=False)
    # Only this test's worker: others may share the broker.
    worker = f"worker-{cluster.run_id}@{socket.gethostname()}"

    def answered() -> dict[str, Any] | None:
        replies: dict[str, Any] | None = client.control.inspect(
            destination=[worker], timeout=1).conf()
        return replies

    try:
        replies = wait_for(answered, timeout=60, what="the worker's answer")
    finally:
        client.close()
    assert "XXXXsecret" not in json.dumps(replies)
    conf = replies[worker]
    assert conf["goatbeat_webhooks"] == "********"
    assert conf["goatbeat_webhook_secret"] == "********"
