"""Request bodies are bounded before they are parsed, on every face: the sign-in form (read
before the sender is known), a dashboard form and the JSON API. A body over the limit is
refused with 413 whether it says its length, says none (chunked) or says a false one; the
bytes the application pulls are counted, and a real server process is watched for memory and
disk while large bodies are thrown at it."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from starlette.routing import Route

from goatbeat_celery.api import Schedules
from goatbeat_celery.tokens import Tokens
from goatbeat_celery.web import WebSettings, create_app
from goatbeat_celery.web.api import API_PREFIX, MAX_BODY
from goatbeat_celery.web.bodies import FORM_BODY, FORM_FIELDS, SIGN_IN_BODY
from goatbeat_celery.web.security import CSRF_FIELD
from tests.web.conftest import TOKEN, Browser, serving

CHUNK = 64 * 1024
#: Far over every limit: a face that read it whole would show it in the counts below.
LARGE = 64 * 1024 * 1024


@dataclass
class Counted:
    """A body sent in chunks that counts how much of it the application pulled."""

    size: int
    pulled: int = 0
    piece: bytes = b"a=" + b"x" * (CHUNK - 3) + b"&"

    def __iter__(self) -> Iterator[bytes]:
        while self.pulled < self.size:
            self.pulled += len(self.piece)
            yield self.piece


@dataclass
class Face:
    """Where a body is posted, with what, and how large it may be."""

    path: str
    limit: int
    headers: dict[str, str] = field(default_factory=dict)
    media: str = "application/x-www-form-urlencoded"
    method: str = "POST"


def _faces(schedules: Schedules) -> list[Face]:
    """A face of each kind, with what it needs to read a body: sign-in, a form, the API."""
    _, secret = Tokens(schedules.store).create("ci", scopes="read,write,run")
    return [
        Face("/login", SIGN_IN_BODY),
        Face("/new", FORM_BODY, {"Authorization": f"Bearer {TOKEN}"}),
        Face("/api/v1/schedules/big", MAX_BODY, {"Authorization": f"Bearer {secret}"},
             "application/json", "PUT"),
    ]


@pytest.fixture
def app_and_faces(schedules: Schedules) -> tuple[Any, list[Face]]:
    """A token-protected dashboard and API, and its faces."""
    return create_app(schedules, WebSettings(token=TOKEN)), _faces(schedules)


def _drive(app: Any, face: Face, body: Counted, length: str | None, *,
           cut: bool = False) -> tuple[int, dict[str, str]]:
    """One request through the application as a server makes it (ASGI), the body handed over a
    chunk at a time as it is asked for (``cut``: the client goes away after the last one):
    (status, headers)."""
    headers = {**face.headers, "Host": "127.0.0.1", "Content-Type": face.media}
    if length is not None:
        headers["Content-Length"] = length
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": face.method, "scheme": "http", "path": face.path,
             "raw_path": face.path.encode(), "query_string": b"", "root_path": "",
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
             "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 80)}
    chunks = iter(body)
    started: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        piece = next(chunks, b"")
        if cut and not piece:
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": piece, "more_body": bool(piece)}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.update(message)

    anyio.run(app, scope, receive, send)
    return started["status"], {k.decode(): v.decode() for k, v in started["headers"]}


@pytest.mark.parametrize("declared", ["over", None, "100"],
                         ids=["length-over", "chunked", "false-length"])
def test_a_body_over_the_limit_is_refused_having_read_at_most_the_limit(
        app_and_faces: tuple[Any, list[Face]], schedules: Schedules,
        declared: str | None) -> None:
    app, faces = app_and_faces
    for face in faces:
        body = Counted(LARGE)
        length = str(face.limit + 1) if declared == "over" else declared
        status, headers = _drive(app, face, body, length)
        assert status == 413, face.path
        assert headers["connection"] == "close"
        if declared == "over":  # refused from its length alone
            assert body.pulled == 0, face.path
        # Otherwise what was pulled is the limit and the one chunk that crossed it.
        assert body.pulled <= face.limit + CHUNK, (face.path, body.pulled)
    assert schedules.list() == []


def test_an_unreadable_length_or_a_body_cut_short_is_refused_not_crashed_on(
        app_and_faces: tuple[Any, list[Face]], schedules: Schedules) -> None:
    app, faces = app_and_faces
    for face in faces:
        assert _drive(app, face, Counted(0), "9" * 5000)[0] == 413, face.path
        assert _drive(app, face, Counted(0), "ten")[0] == 400, face.path
        short = Counted(10, piece=b"a=b&c=d&e=")
        assert _drive(app, face, short, None, cut=True)[0] == 400, face.path
    assert schedules.list() == []


def test_every_form_of_the_dashboard_is_bounded(schedules: Schedules) -> None:
    app = create_app(schedules, WebSettings(token=TOKEN))
    paths = sorted({route.path for route in app.routes if isinstance(route, Route)
                    and (route.methods or set()) - {"GET", "HEAD"}
                    and not route.path.startswith(API_PREFIX)})
    assert {"/login", "/logout", "/new", "/schedule/edit", "/calendars"} <= set(paths)
    for path in paths:
        limit = SIGN_IN_BODY if path == "/login" else FORM_BODY
        face = Face(path, limit, {"Authorization": f"Bearer {TOKEN}"})
        body = Counted(LARGE)
        assert _drive(app, face, body, None)[0] == 413, path
        assert body.pulled <= limit + CHUNK, (path, body.pulled)


def test_a_body_within_the_limit_is_read_as_before(make_client: Any,
                                                   schedules: Schedules) -> None:
    found = _faces(schedules)
    client = make_client(WebSettings(token=TOKEN))
    signed_in = client.submit("/login", token=TOKEN)
    assert signed_in.status_code == 303
    client.cookies.clear()
    client.headers["Authorization"] = f"Bearer {TOKEN}"
    created = client.submit("/new", name="small", task="proj.tasks.x", kind="every",
                            every="60", kwargs='{"blob": "' + "x" * 60_000 + '"}')
    assert created.status_code == 303, created.text[:500]
    api = found[2]
    # JSON may be padded with blanks: a body of exactly the limit is read whole.
    definition = json.dumps({"task": "proj.tasks.x", "every": 60, "kwargs": {"b": "y" * 60_000}})
    padded = definition + " " * (MAX_BODY - len(definition))
    put = client.put(api.path, content=padded, headers={**api.headers,
                                                         "Content-Type": "application/json"})
    assert put.status_code == 201, put.text[:500]
    assert sorted(s.name for s in schedules.list()) == ["big", "small"]


def test_sign_in_refuses_multipart_unread(make_client: Any) -> None:
    client = make_client(WebSettings(token=TOKEN))
    body = Counted(LARGE)
    response = client.post("/login", content=body, headers={
        "Content-Type": "multipart/form-data; boundary=x"})
    assert response.status_code == 415
    assert "application/x-www-form-urlencoded" in response.text
    assert body.pulled == 0
    # Nor does a form of a small multipart body sign anyone in.
    small = client.post("/login", files={"token": (None, TOKEN)},
                        data={CSRF_FIELD: client.csrf()}, follow_redirects=False)
    assert small.status_code == 415
    assert client.get("/", follow_redirects=False).status_code == 303


def test_a_form_of_too_many_fields_is_refused(client: Browser, schedules: Schedules) -> None:
    fields = "&".join(f"f{k}=" for k in range(FORM_FIELDS + 1))
    response = client.post("/new", content=f"{CSRF_FIELD}={client.csrf()}&name=x&{fields}",
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 413 and "fields" in response.text
    assert schedules.list() == []


# -- a real server process --------------------------------------------------------------------
def _status(pid: int, key: str) -> int:
    """A figure of /proc/PID/status in bytes (VmHWM: the most memory the process held)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} for {pid}")


def _written(pid: int) -> int:
    """Bytes the process has passed to write() (files, pipes), sockets aside."""
    with open(f"/proc/{pid}/io") as io:
        return int(dict(line.split(": ") for line in io.read().splitlines())["wchar"])


def _send(url: str, method: str, path: str, headers: dict[str, str], size: int, *,
          chunked: bool, prefix: bytes = b"") -> tuple[int, int]:
    """Send ``prefix`` and ``size`` bytes more as a body over a raw socket, stopping as soon as
    the server answers or closes; (the status it answered, the bytes the kernel took)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    piece = b"a=" + b"x" * (512 * 1024 - 3) + b"&"
    framing = ({"Transfer-Encoding": "chunked"} if chunked
               else {"Content-Length": str(len(prefix) + size)})
    head = "".join(f"{name}: {value}\r\n" for name, value in
                   {"Host": f"{host}:{port}", **headers, **framing}.items())
    sent = 0
    with socket.create_connection((host, port), timeout=60) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\n{head}\r\n".encode())
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if prefix:
                sock.sendall(f"{len(prefix):x}\r\n".encode() + prefix + b"\r\n" if chunked
                             else prefix)
            while sent < size and not select.select([sock], [], [], 0)[0]:
                frame = (f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked
                         else piece)
                sock.sendall(frame)
                sent += len(piece)
        answer = b""
        while b"\r\n" not in answer:
            received = sock.recv(4096)
            assert received, f"{path}: closed without an answer after {sent} bytes"
            answer += received
    return int(answer.split(b" ", 2)[1]), sent


def test_a_real_server_holds_no_large_body_in_memory_or_on_disk(
        cli_for: Any, pg_empty_url: str, schedules: Schedules) -> None:
    _, secret = Tokens(schedules.store).create("ci", scopes="read,write,run")
    cli = cli_for(pg_empty_url)
    environment = {**cli.environment(), "GOATBEAT_WEB_TOKEN": TOKEN}
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    with serving(cli, environment) as (url, _output, pid):
        # The pages rendered once (templates compiled) before the figures are read.
        assert _send(url, "POST", "/login", form, 0, chunked=False)[0] == 403
        peak, written = _status(pid, "VmHWM"), _written(pid)
        attacks = [
            ("/login", form, True), ("/login", form, False), ("/login", form, True),
            ("/new", {**form, "Authorization": f"Bearer {TOKEN}"}, True),
            ("/new", {**form, "Authorization": f"Bearer {TOKEN}"}, False),
            ("/api/v1/schedules/big", {"Content-Type": "application/json",
                                       "Authorization": f"Bearer {secret}"}, True),
            ("/api/v1/schedules/big", {"Content-Type": "application/json",
                                       "Authorization": f"Bearer {secret}"}, False),
            ("/login", {"Content-Type": "multipart/form-data; boundary=b"}, False),
        ]
        # A file part: a server that parses it spools it to a temp file past 1 MiB.
        upload = (b'--b\r\nContent-Disposition: form-data; name="f"; filename="f.bin"\r\n'
                  b"Content-Type: application/octet-stream\r\n\r\n")
        answers: list[tuple[str, int, int]] = []

        def attack(path: str, headers: dict[str, str], chunked: bool) -> None:
            method = "PUT" if path.startswith("/api/") else "POST"
            prefix = upload if "multipart" in headers["Content-Type"] else b""
            answers.append((path, *_send(url, method, path, headers, LARGE, chunked=chunked,
                                         prefix=prefix)))

        # In parallel, as the attack was made: three at a time held 3 GB before.
        threads = [threading.Thread(target=attack, args=one) for one in attacks]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        grown, wrote = _status(pid, "VmHWM") - peak, _written(pid) - written
    # Each body is 64 MiB; the limits they meet add up to about 10 MiB, held one request at a
    # time or together: 32 MiB covers that with room for the threads' and parsers' own use.
    assert grown < 32 * 1024 * 1024, f"peak memory grew by {grown} bytes"
    # Nothing spooled to a temp file: what was written is the access log's lines.
    assert wrote < 256 * 1024, f"{wrote} bytes written"
    # The kernel took what its buffers hold, not the bodies (which a reading server takes).
    assert all(sent < LARGE for _, _, sent in answers), answers
    assert sorted((path, status) for path, status, _ in answers) == sorted(
        (path, 415 if "multipart" in headers["Content-Type"] else 413)
        for path, headers, _ in attacks)
