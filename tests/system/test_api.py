"""The JSON API end to end: ``celery goatbeat web`` serving it, a ``celery beat`` leader and a
``celery worker`` running the schedules it writes, PostgreSQL and Redis; the API driven from
other processes, by ``curl`` and by two plain HTTP clients (``apiclient.py``) at once."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait_for
from tests.system.harness import HERE, Cluster, Process
from tests.web.conftest import free_port

pytestmark = [pytest.mark.system, pytest.mark.slow]

#: The default lease: the statement timeout, which the API's server shares with beat, is half
#: the lease's local validity (ttl - renew) when that is under 10 s. With a 3 s lease renewed
#: every second it was 1 s, and on a loaded machine a write that took longer answered 503.
#: Nothing here fails over.
SETTINGS = {"lease_ttl": 30, "lease_renew_interval": 10, "max_interval": 1.0}
#: Every schedule runs every 2 s, so that beat claims them all while the clients edit them:
#: no run may make an edit fail.
EVERY = 2
TEAMS = [f"team-a-{i:03}" for i in range(50)] + [f"team-b-{i:03}" for i in range(50)]
#: Starting a Python process that imports Celery, Starlette and SQLAlchemy takes a few
#: seconds on a busy two-core machine; 30 s is far beyond it.
START_BOUND = 30.0




def curl(url: str, secret: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One request with curl; its status and parsed body (None when empty)."""
    command = ["curl", "-sS", "-X", method, "-H", f"Authorization: Bearer {secret}",
               "-w", "\n%{http_code}", f"{url}/api/v1{path}"]
    if body is not None:
        command += ["-H", "Content-Type: application/json", "--data", json.dumps(body)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
    text, _, status = done.stdout.rpartition("\n")
    return int(status), json.loads(text) if text else None


def start_web(cluster: Cluster) -> tuple[Process, str]:
    port = free_port()
    web = cluster.start("web", ["goatbeat", "web", "--bind", f"127.0.0.1:{port}"])
    url = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        done = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                               f"{url}/api/v1/openapi.json"], capture_output=True, text=True,
                              check=False)
        return done.stdout == "200"

    wait_for(answering, timeout=START_BOUND, what="the web server answering")
    return web, url


def test_two_clients_editing_at_once_never_overwrite_each_other_while_beat_runs(
        cluster: Cluster, tmp_path: Path) -> None:
    cluster.write_config(settings=SETTINGS, schedules={})
    secret = json.loads(cluster.goatbeat("token", "create", "ops", "--scope", "read,write,run",
                            "--json"))["secret"]
    team_a = json.loads(cluster.goatbeat("token", "create", "team-a", "--scope",
                            "read,write,run", "--prefix", "team-a-", "--json"))["secret"]
    cluster.start_worker()
    cluster.start_beat("beat-1")
    _, url = start_web(cluster)

    # 100 schedules, by one curl process (a request per --next, on one connection).
    command = ["curl", "-sS"]
    for name in TEAMS:
        body = json.dumps({"task": "sysproj.record", "every": EVERY, "args": [name]})
        command += ["-o", "/dev/null", "-w", "%{http_code}\n", "-X", "PUT",
                    "-H", f"Authorization: Bearer {secret}",
                    "-H", "Content-Type: application/json", "--data", body,
                    f"{url}/api/v1/schedules/{name}", "--next"]
    created = subprocess.run(command[:-1], capture_output=True, text=True, timeout=120,
                             check=True)
    assert created.stdout.split() == ["201"] * len(TEAMS), created.stdout + created.stderr
    cluster.wait_for_leader()
    wait_for(lambda: len({r["schedule"] for r in cluster.records()}) >= 10,
             timeout=2 * EVERY + START_BOUND, what="beat running the new schedules")

    # Two clients at once, each reading every ETag first, then writing with If-Match.
    go = tmp_path / "go"
    clients = [subprocess.Popen(
        [sys.executable, str(HERE / "apiclient.py"), url, client, str(go), *TEAMS],
        stdout=subprocess.PIPE, text=True, env={**cluster.env(), "GOATBEAT_API_TOKEN": secret})
        for client in ("A", "B")]
    for process in clients:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    go.touch()
    writes = []
    for process in clients:
        out, _ = process.communicate(timeout=300)
        assert process.returncode == 0
        writes.extend(json.loads(line) for line in out.splitlines())

    assert Counter(w["status"] for w in writes).keys() <= {200, 412}, writes
    # Both read the same version of each schedule before either wrote: one write wins, the
    # other is refused, whatever beat claimed meanwhile.
    race = [w for w in writes if w["phase"] == "race"]
    for name in TEAMS:
        assert sorted(w["status"] for w in race if w["name"] == name) == [200, 412], name
    # No two writes succeeded from the same version: none overwrote another unseen.
    won = [w for w in writes if w["status"] == 200]
    assert len({(w["name"], w["base"]) for w in won}) == len(won)
    status, listed = curl(url, secret, "GET", "/schedules?limit=1000")
    assert status == 200
    stored = {s["name"]: s for s in listed["schedules"]}
    for name in TEAMS:
        mine = sorted((w for w in won if w["name"] == name), key=lambda w: int(w["etag"][1:-1]))
        start = int(mine[0]["base"][1:-1])
        # Each win moved the version by one from the one before: the last write is what is
        # stored, and none was lost.
        assert stored[name]["version"] == start + len(mine), (name, mine, stored[name])
        last = mine[-1]
        assert stored[name]["schedule_description"] == (
            f"{last['client']} {last['phase']} {last['n']}")
    assert cluster.sql("SELECT count(*) AS n FROM goatbeat_execution")[0]["n"] > 0

    # Pause, run now, delete.
    status, paused = curl(url, secret, "POST", "/schedules/team-a-000/pause",
                          {"note": "maintenance"})
    assert status == 200 and paused["state"] == "paused"
    status, run = curl(url, secret, "POST", "/schedules/team-a-000/run")
    assert status == 202
    wait_for(lambda: any(r["id"] == run["key"] for r in cluster.records()),
             timeout=START_BOUND, what="the run-now run reaching the worker")
    assert curl(url, secret, "DELETE", "/schedules/team-a-001")[0] == 204
    assert curl(url, secret, "GET", "/schedules/team-a-001")[0] == 404

    # A token limited to team-a- sees its own schedules only; team-b's answer as absent to a
    # read, and a write of one is refused on its name.
    status, listed = curl(url, team_a, "GET", "/schedules?limit=1000")
    assert status == 200
    assert [s["name"] for s in listed["schedules"]] == [n for n in TEAMS
                                                       if n.startswith("team-a-")
                                                       and n != "team-a-001"]
    assert curl(url, team_a, "GET", "/schedules/team-b-000")[0] == 404
    before = curl(url, secret, "GET", "/schedules/team-b-000")[1]["version"]
    assert curl(url, team_a, "PUT", "/schedules/team-b-000",
                {"task": "sysproj.record", "every": 60})[0] == 403
    assert curl(url, team_a, "POST", "/schedules/team-b-000/run")[0] == 403
    assert curl(url, secret, "GET", "/schedules/team-b-000")[1]["version"] == before
