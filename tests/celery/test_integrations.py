"""Sentry Crons, Datadog and OpenTelemetry watching goatbeat, with their real clients.

Each client patches Celery for the life of its process, so each scenario runs in a child
process (``tests/celery/hooked.py``) and reports what the client captured: Sentry's envelopes
through a capturing transport, ddtrace's spans through a trace filter, OpenTelemetry's through
the SDK's in-memory exporter. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: A scenario takes about ten seconds on a quiet 2-core machine (interpreter and client start-up,
#: two beat replicas, an embedded worker); four times that leaves room for a loaded one.
SCENARIO_TIMEOUT = 60


def run_scenario(name: str, directory: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "tests.celery.hooked", name, str(directory)],
                          cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=SCENARIO_TIMEOUT, check=False)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, (
        f"{name} scenario failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
        f"{done.stderr[-3000:]}")
    return dict(json.loads(results[-1][len("RESULT "):]))


def by_check_in(checkins: list[dict[str, Any]]) -> dict[str, list[tuple[str, Any]]]:
    """Per monitor, the (status, monitor config) of each check-in, grouped by check_in_id."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for checkin in checkins:
        groups[checkin["check_in_id"]].append(checkin)
    shapes: dict[str, list[tuple[str, Any]]] = {}
    for group in groups.values():
        assert len({c["monitor_slug"] for c in group}) == 1
        shapes.setdefault(group[0]["monitor_slug"], []).append(
            tuple((c["status"], json.dumps(c["monitor_config"], sort_keys=True))
                  for c in group))  # type: ignore[arg-type]
    return shapes


def test_sentry_sees_the_check_ins_celery_beat_would_send(tmp_path: Path):
    result = run_scenario("sentry", tmp_path)
    default, goatbeat = by_check_in(result["default"]), by_check_in(result["goatbeat"])
    names = {"cron-config", "interval-config", "cron-api", "interval-api"}
    assert set(default) == names and set(goatbeat) == {*names, "cron-paris"}
    for name in names:
        # Each run under Celery's beat (a minute boundary, or a slow machine, may add one): in
        # progress from beat, then the worker's end.
        expected = default[name][0]
        assert all(shape == expected for shape in default[name]), name
        assert [status for status, _ in expected] == [
            "in_progress", "error" if name == "interval-config" else "ok"]
        # Every run goatbeat sent (a minute boundary may add one): the same pair, once.
        assert goatbeat[name] and all(shape == expected for shape in goatbeat[name]), name
        assert len(goatbeat[name]) == len(result["sent"][name])
    assert json.loads(default["cron-api"][0][0][1]) == {
        "schedule": {"type": "crontab", "value": "* * * * *"}, "timezone": "UTC"}
    assert json.loads(default["interval-api"][0][0][1]) == {
        "schedule": {"type": "interval", "value": 1, "unit": "minute"}, "timezone": "UTC"}
    # A cron made with the API in a zone of its own: its monitor is in that zone.
    for shape in goatbeat["cron-paris"]:
        assert [status for status, _ in shape] == ["in_progress", "ok"]
        assert {json.dumps(json.loads(config)) for _, config in shape} == {json.dumps(
            {"schedule": {"type": "crontab", "value": "* * * * *"},
             "timezone": "Europe/Paris"})}
    assert len(goatbeat["cron-paris"]) == len(result["sent"]["cron-paris"])


def test_ddtrace_traces_each_run_from_apply_entry_to_the_worker(tmp_path: Path):
    result = run_scenario("ddtrace", tmp_path)
    spans = result["spans"]
    sent = {key for keys in result["sent"].values() for key in keys}
    applies = [s for s in spans if s["name"] == "celery.beat.apply_entry"]
    # One apply_entry span per run sent, from the leader only (the standby sends nothing).
    assert len(applies) == len(sent) >= 2
    assert {s["resource"] for s in applies} == {"every-second"}
    by_id = {s["span_id"]: s for s in spans}
    for key in result["done"]:
        (run,) = [s for s in spans if s["name"] == "celery.run" and s["task_id"] == key]
        publish = by_id[run["parent_id"]]
        assert publish["name"] == "celery.apply" and publish["task_id"] == key
        apply_entry = by_id[publish["parent_id"]]
        assert apply_entry["name"] == "celery.beat.apply_entry"
        assert run["trace_id"] == publish["trace_id"] == apply_entry["trace_id"]


def test_opentelemetry_traces_each_occurrence_from_claim_to_the_worker(tmp_path: Path):
    result = run_scenario("otel", tmp_path)
    spans = result["spans"]
    by_id = {s["span_id"]: s for s in spans}
    occurrences = [s for s in spans if s["name"] == "goatbeat.occurrence"]
    sent = {key for keys in result["sent"].values() for key in keys}
    assert {s["attributes"]["goatbeat.key"] for s in occurrences} == sent
    assert len(occurrences) == len(sent) >= 2
    for key in result["done"]:
        (run,) = [s for s in spans if s["name"] == "run/hooked.work"
                  and s["attributes"]["messaging.message.id"] == key]
        publish = by_id[run["parent_id"]]
        assert publish["name"] == "apply_async/hooked.work"
        occurrence = by_id[publish["parent_id"]]
        assert occurrence["name"] == "goatbeat.occurrence" and occurrence["parent_id"] is None
        attributes = occurrence["attributes"]
        assert attributes["goatbeat.key"] == key
        assert attributes["goatbeat.schedule"] == "every-second"
        assert key == f"every-second:{attributes['goatbeat.occurrence_at']}"
        assert attributes["goatbeat.manual"] is False
        # From the claim to the send: it starts before the publish and ends after it.
        assert occurrence["start"] <= publish["start"] and occurrence["end"] >= publish["end"]
        assert run["trace_id"] == publish["trace_id"] == occurrence["trace_id"]
