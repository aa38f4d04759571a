"""One client of the JSON API, run as its own process by tests/system/test_api.py: plain HTTP
(``http.client``), one connection, as a script of an operator's would.

``python apiclient.py URL CLIENT GO_FILE NAME...`` (the token in ``GOATBEAT_API_TOKEN``):

1. reads every schedule's ETag, prints ``ready`` and waits for ``GO_FILE`` to exist;
2. puts each schedule with ``If-Match`` from that first read (so that of two clients started
   together exactly one may win each schedule);
3. then ``ROUNDS`` rounds of read-and-put with If-Match, the other client doing the same.

Prints one JSON line per write: phase, name, the ETag it was based on, status, the new ETag.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
from typing import Any
from urllib.parse import quote, urlsplit

ROUNDS = 1


def main() -> None:
    url, client, go_file, *names = sys.argv[1:]
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    auth = {"Authorization": f"Bearer {os.environ['GOATBEAT_API_TOKEN']}"}

    def call(method: str, name: str, body: Any = None,
             headers: dict[str, str] | None = None) -> tuple[int, str | None]:
        data = None if body is None else json.dumps(body)
        sent = {**auth, **(headers or {})}
        if data is not None:
            sent["Content-Type"] = "application/json"
        connection.request(method, f"/api/v1/schedules/{quote(name)}", body=data,
                           headers=sent)
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("ETag")

    def write(phase: str, name: str, etag: str | None, n: int) -> None:
        # The description tells the writes apart: a definition field the task never sees.
        body = {"task": "sysproj.record", "every": 2, "args": [name],
                "description": f"{client} {phase} {n}"}
        status, new = call("PUT", name, body, {"If-Match": etag or ""})
        print(json.dumps({"phase": phase, "name": name, "base": etag, "status": status,
                          "etag": new, "client": client, "n": n}), flush=True)

    first = {name: call("GET", name)[1] for name in names}
    print("ready", flush=True)
    while not os.path.exists(go_file):
        time.sleep(0.005)
    for name in names:
        write("race", name, first[name], 0)
    for n in range(1, ROUNDS + 1):
        for name in names:
            write("loop", name, call("GET", name)[1], n)


if __name__ == "__main__":
    main()
