"""Who may see the dashboard and change schedules through it.

* **Binding.** The server listens on loopback unless told otherwise, and refuses an address
  other hosts can reach while no token is configured (:func:`bind_problem`).
* **Authentication.** With a token configured, every request proves it knows it: a
  ``Authorization: Bearer <token>`` header, basic auth with the token as password (any user
  name), or the session cookie the login form sets. The cookie holds an HMAC of the token, never
  the token; every comparison is :func:`hmac.compare_digest`.
* **CSRF.** A double-submit token: a random value in a ``SameSite=Strict`` cookie, repeated in a
  hidden field of every form. A POST whose field does not match its cookie is refused with 403
  before anything is read or written.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import secrets
import socket
from dataclasses import dataclass

#: The environment variable the ``web`` command reads the token from.
TOKEN_VARIABLE = "GOATBEAT_WEB_TOKEN"
CSRF_COOKIE = "goatbeat_csrf"
CSRF_FIELD = "csrf_token"
SESSION_COOKIE = "goatbeat_session"
#: Shortest token accepted: a guessable token is no protection on a reachable address.
MIN_TOKEN_LENGTH = 16


@dataclass(frozen=True, kw_only=True)
class WebSettings:
    """How the dashboard guards itself.

    ``token``: required from every request when set (see the module docstring).
    ``read_only``: show everything, change nothing (no forms; every POST refused with 403).
    ``secure_cookies``: mark cookies ``Secure`` (when served behind HTTPS).
    """

    token: str | None = None
    read_only: bool = False
    secure_cookies: bool = False

    def problems(self) -> list[str]:
        if self.token is not None and len(self.token) < MIN_TOKEN_LENGTH:
            return [f"{TOKEN_VARIABLE}: a token needs at least {MIN_TOKEN_LENGTH} characters "
                    f"(got {len(self.token)}); e.g. python -c 'import secrets; "
                    "print(secrets.token_urlsafe(32))'"]
        return []


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def same_secret(given: str | None, expected: str | None) -> bool:
    """Constant-time equality of two secrets; a missing one never matches."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def session_value(token: str) -> str:
    """What the session cookie holds: derived from the token, which it never reveals."""
    return hmac.new(token.encode(), b"goatbeat web session", hashlib.sha256).hexdigest()


def authenticated(token: str | None, *, authorization: str | None,
                  session: str | None) -> bool:
    """True when no token is configured, or the request proves it knows it."""
    if token is None:
        return True
    if session is not None and same_secret(session, session_value(token)):
        return True
    if not authorization:
        return False
    scheme, _, credentials = authorization.partition(" ")
    credentials = credentials.strip()
    if scheme.lower() == "bearer":
        return same_secret(credentials, token)
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return False
        _, _, password = decoded.partition(":")
        return same_secret(password, token)
    return False


def is_loopback(host: str) -> bool:
    """True when every address ``host`` stands for is a loopback address."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback
                               for info in infos)


def bind_problem(host: str, settings: WebSettings) -> str | None:
    """Why the dashboard must not listen on ``host``, or None when it may."""
    if is_loopback(host) or settings.token is not None:
        return None
    return (f"refusing to listen on {host}, which other hosts can reach, without "
            f"authentication: set {TOKEN_VARIABLE} to a secret of at least {MIN_TOKEN_LENGTH} "
            "characters (or bind 127.0.0.1 and reach it through an SSH tunnel)")


def parse_bind(text: str, default_port: int) -> tuple[str, int]:
    """``HOST:PORT``, ``HOST``, ``:PORT`` or ``[IPv6]:PORT`` → (host, port)."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    host = host or "127.0.0.1"
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
    return host, int(port_text)
