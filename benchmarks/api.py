"""Time the JSON API's creates and updates under concurrent clients, on PostgreSQL.

    GOATBEAT_TEST_PG_URL=postgresql+psycopg://postgres:postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m benchmarks.api [--schedules 1000] [--clients 1,4,16]

Creates a database of its own on that server (dropped afterwards), serves the dashboard's
application (the API under /api/v1) with uvicorn in a process of its own, as ``celery goatbeat
web`` does, and drives it from client processes, each with one keep-alive connection (plain
``http.client``), for each number of clients:

* create: ``PUT`` of new schedules, the clients' shares of ``--schedules`` names;
* update: each client reads a schedule (``GET``) and writes it back changed with ``If-Match``,
  over the same names as every other client, so that clients collide: a write that lost to
  another (412) is counted, not retried.

Prints requests per second and the median, 95th and 99th percentile latency of each.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import make_url

TOKEN_NAME = "bench"


def serve(url: str, port: int) -> None:
    """The server process: the dashboard's application on ``url``'s store."""
    import uvicorn
    from celery import Celery

    from goatbeat_celery.api import Schedules
    from goatbeat_celery.web import create_app

    app = Celery("benchapi", broker="memory://", set_as_current=False)
    app.conf.update(goatbeat_database_url=url)
    uvicorn.run(create_app(Schedules.from_app(app), close_on_shutdown=True), host="127.0.0.1",
                port=port, log_level="warning")


def _client(args: tuple[int, str, str, str, Sequence[str]]) -> dict[str, Any]:
    """One client: ``create`` PUTs each name new; ``update`` GETs and PUTs each with If-Match.
    Returns the latencies (seconds) of its writes and how many were refused with 412."""
    port, secret, phase, label, names = args
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    auth = {"Authorization": f"Bearer {secret}"}
    latencies: list[float] = []
    refused = failed = 0
    for n, name in enumerate(names):
        headers = {**auth, "Content-Type": "application/json"}
        if phase == "update":
            connection.request("GET", f"/api/v1/schedules/{name}", headers=auth)
            read = connection.getresponse()
            read.read()
            headers["If-Match"] = read.getheader("ETag") or ""
        body = json.dumps({"task": "proj.tasks.tick", "every": 60, "args": [name],
                           "kwargs": {"client": label, "n": n}})
        started = time.perf_counter()
        connection.request("PUT", f"/api/v1/schedules/{name}", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        latencies.append(time.perf_counter() - started)
        if response.status == 412:
            refused += 1
        elif response.status not in (200, 201):
            failed += 1
    connection.close()
    return {"latencies": latencies, "refused": refused, "failed": failed}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def run(port: int, secret: str, phase: str, clients: int, names: list[str],
        pool: Any) -> None:
    if phase == "create":
        shares = [names[k::clients] for k in range(clients)]
    else:
        shares = [names for _ in range(clients)]
    started = time.perf_counter()
    results = pool.map(_client, [(port, secret, phase, f"c{k}", share)
                                 for k, share in enumerate(shares)])
    elapsed = time.perf_counter() - started
    latencies = [value for result in results for value in result["latencies"]]
    refused = sum(result["refused"] for result in results)
    failed = sum(result["failed"] for result in results)
    print(f"{phase:6}  {clients:3} clients  {len(latencies):6} writes  "
          f"{len(latencies) / elapsed:7.0f}/s  p50 {statistics.median(latencies) * 1000:6.1f} ms"
          f"  p95 {_percentile(latencies, 0.95) * 1000:6.1f} ms"
          f"  p99 {_percentile(latencies, 0.99) * 1000:6.1f} ms"
          f"  412: {refused}" + (f"  FAILED: {failed}" if failed else ""), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--clients", default="1,4,16",
                        help="numbers of concurrent clients, comma-separated")
    parser.add_argument("--serve", nargs=2, metavar=("URL", "PORT"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        serve(options.serve[0], int(options.serve[1]))
        return 0
    warnings.filterwarnings("ignore", category=DeprecationWarning)

    from goatbeat_celery.store import open_store
    from goatbeat_celery.tokens import Tokens
    from tests.conftest import migrated_database

    server = make_url(os.environ.get("GOATBEAT_TEST_PG_URL",
                                     "postgresql+psycopg://postgres@127.0.0.1:5432/test"))
    counts = [int(word) for word in options.clients.split(",")]
    print(f"{os.cpu_count()} cores; {options.schedules} schedules per run; server: one "
          "uvicorn process; clients: one process each, one connection each")
    with migrated_database(server, f"goatbeat_bench_api_{os.getpid()}") as url:
        store = open_store(url)
        _, secret = Tokens(store).create(TOKEN_NAME, scopes="read,write")
        store.close()
        port = _free_port()
        process = subprocess.Popen([sys.executable, "-m", "benchmarks.api", "--serve", url,
                                    str(port)])
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise
                    time.sleep(0.1)
            with multiprocessing.Pool(max(counts)) as pool:
                for clients in counts:
                    names = [f"bench-{clients}-{n:06d}" for n in range(options.schedules)]
                    run(port, secret, "create", clients, names, pool)
                    run(port, secret, "update", clients, names[: max(100, len(names) // 10)],
                        pool)
        finally:
            process.terminate()
            process.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
