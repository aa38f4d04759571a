"""Who may see the dashboard and change schedules through it.

* **Binding.** The server listens on loopback unless told otherwise, and refuses an address
  other hosts can reach while no token is configured (:func:`bind_problem`).
* **Names.** A request is answered when its ``Host`` names a loopback address literally
  (``127.0.0.1``, ``[::1]``, ``localhost``) or a name given in ``allowed_hosts``; with a token
  and no ``allowed_hosts``, whatever its ``Host`` (:func:`host_refusal`). A web page whose
  name an attacker re-points at 127.0.0.1 (DNS rebinding) is same-origin with a dashboard that
  answers any name; one that checks the name is not. A name is never resolved to decide:
  resolving is what rebinding fools.
* **Origins.** A state-changing request sent by a browser from another site
  (``Sec-Fetch-Site``) or from another origin than the one it is addressed to (``Origin``) is
  refused (:func:`cross_site_refusal`), whatever its cookies say.
* **Authentication.** With a token configured, every request proves it knows it: a
  ``Authorization: Bearer <token>`` header, basic auth with the token as password (any user
  name), or the session cookie the login form sets. A session is signed with a secret the
  server draws when it starts (never the token), expires after ``session_lifetime`` and is
  revoked on the server when its holder signs out (:class:`Signer`). Every comparison is
  :func:`hmac.compare_digest`.
* **CSRF.** A signed double-submit token: a random value and its HMAC under the server's
  secret and the request's session, in a ``SameSite=Strict`` cookie and repeated in a hidden
  field of every form. A POST whose field does not match its cookie, or whose value the server
  did not sign for this session, is refused with 403 before anything is read or written.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlsplit

from goatbeat_celery.core.types.problems import Problem

#: The environment variable the ``web`` command reads the token from.
TOKEN_VARIABLE = "GOATBEAT_WEB_TOKEN"
CSRF_COOKIE = "goatbeat_csrf"
CSRF_FIELD = "csrf_token"
SESSION_COOKIE = "goatbeat_session"
#: Browsers send a cookie whose name starts so only over HTTPS, to the host that set it,
#: for the whole host; nothing else on the host can set or shadow it.
SECURE_PREFIX = "__Host-"
#: Shortest token accepted: a guessable token is no protection on a reachable address.
MIN_TOKEN_LENGTH = 16
#: How long a sign-in lasts unless the settings say otherwise.
SESSION_LIFETIME = timedelta(hours=12)
#: Sent with every page: nothing but the package's own stylesheet and script may load (no
#: inline script, no eval), and that script may read the dashboard's own pages only.
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; style-src 'self'; img-src 'self'; "
                                "script-src 'self'; connect-src 'self'; "
                                "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
_LABEL = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
_HOST_NAME = re.compile(rf"(?i){_LABEL}(?:\.{_LABEL})*")
#: Host names that always mean this host and that no DNS answer can re-point.
LOOPBACK_NAMES = frozenset({"localhost"})


@dataclass(frozen=True, kw_only=True)
class WebSettings:
    """How the dashboard guards itself.

    ``token``: required from every request when set (see the module docstring).
    ``read_only``: show everything, change nothing (no forms; every POST refused with 403).
    ``secure_cookies``: served over HTTPS: cookies are ``Secure`` and named ``__Host-…``.
    ``allowed_hosts``: names besides the loopback ones a request's ``Host`` may give (the name
    a reverse proxy or a tunnel reaches the dashboard by); checked with or without a token.
    ``session_lifetime``: how long a sign-in lasts.
    ``actor``: who the audit log says made the changes made here.
    """

    token: str | None = None
    read_only: bool = False
    secure_cookies: bool = False
    allowed_hosts: tuple[str, ...] = ()
    session_lifetime: timedelta = SESSION_LIFETIME
    actor: str = "dashboard"

    def problems(self) -> list[Problem]:
        found = []
        if self.token is not None and len(self.token) < MIN_TOKEN_LENGTH:
            found.append(Problem(
                TOKEN_VARIABLE, f"a token needs at least {MIN_TOKEN_LENGTH} characters (got "
                f"{len(self.token)})",
                "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'"))
        found.extend(Problem("allowed_hosts", f"{name!r} is not a host name or address alone",
                             "give one such as beat.example.com (no scheme, port, path or "
                             "wildcard)")
                     for name in self.allowed_hosts if not _plain_host(name))
        if self.session_lifetime <= timedelta(0):
            found.append(Problem("session_lifetime",
                                 f"must be positive (got {self.session_lifetime})"))
        return found

    def cookie_name(self, name: str) -> str:
        return SECURE_PREFIX + name if self.secure_cookies else name


def _plain_host(name: str) -> bool:
    return _ip_literal(name) or _HOST_NAME.fullmatch(name) is not None


def _ip_literal(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


def host_name(host_header: str) -> str:
    """The name in a ``Host`` header, without its port, lower-cased (``[::1]:80`` → ``::1``)."""
    text = host_header.strip().lower()
    if text.startswith("["):
        return text[1:].partition("]")[0]
    name, sep, port = text.rpartition(":")
    return name if sep and port.isdigit() and ":" not in name else text


def host_refusal(host_header: str | None, settings: WebSettings) -> str | None:
    """Why a request with this ``Host`` is not answered, or None when it is.

    Allowed: a loopback address written as such or ``localhost``, with or without a token (a
    rebound page is addressed by its own name, never by these, and an operator on the host
    reaches the dashboard by them: a health check, an SSH tunnel); and a name in
    ``settings.allowed_hosts``. With a token and no ``allowed_hosts``, every name is answered:
    a rebound page holds neither the token nor this host's session cookie.
    """
    name = host_name(host_header or "")
    if name and name in {allowed.lower().strip("[]") for allowed in settings.allowed_hosts}:
        return None
    if settings.token is not None and not settings.allowed_hosts:
        return None
    if name in LOOPBACK_NAMES or _loopback_literal(name):
        return None
    names = ["127.0.0.1", "[::1]", "localhost", *settings.allowed_hosts]
    return (f"this dashboard answers only to {', '.join(names)}, not to the name "
            f"{host_header or '(none)'!r}; to reach it by that name, start it with "
            "--allowed-host NAME")


def _loopback_literal(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def cross_site_refusal(*, origin: str | None, fetch_site: str | None,
                       host_header: str | None) -> str | None:
    """Why a state-changing request comes from another site, or None when nothing says so.

    A browser names the site a request comes from (``Sec-Fetch-Site``) and, for a POST, the
    origin (``Origin``); a script such as curl sends neither and is judged by its CSRF token
    alone. The origin is compared with the ``Host`` the request was addressed to, scheme
    aside, so that a dashboard behind an HTTPS proxy still recognises its own forms.
    """
    if fetch_site is not None and fetch_site.lower() not in ("same-origin", "none"):
        return f"it was sent from another site (Sec-Fetch-Site: {fetch_site})"
    if origin is None:
        return None
    parts = urlsplit(origin.strip().lower())
    own = (host_header or "").strip().lower()
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"its origin {origin!r} is not this dashboard's"
    netloc = parts.netloc
    default = {"http": ":80", "https": ":443"}[parts.scheme]
    if netloc.endswith(default):
        netloc = netloc[: -len(default)]
    if own.endswith(default):
        own = own[: -len(default)]
    if netloc != own:
        return f"its origin {origin!r} is not this dashboard's"
    return None


@dataclass
class Signer:
    """The server's secret for this process, drawn at start: it signs sessions and CSRF
    tokens, so neither can be made without it (and a restart signs everyone out).

    A session is ``<issued>.<nonce>.<mac>``: valid while younger than ``lifetime`` and not
    revoked. A CSRF token is ``<nonce>.<mac>`` bound to the session it was issued for.
    """

    token: str | None
    lifetime: timedelta
    clock: Callable[[], float] = time.time
    _key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    _revoked: dict[str, float] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _mac(self, purpose: str, *parts: str) -> str:
        # The token takes part: sessions signed for another token are worth nothing.
        message = "\x00".join((purpose, self.token or "", *parts)).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def new_session(self) -> str:
        issued = str(int(self.clock()))
        nonce = secrets.token_urlsafe(16)
        return f"{issued}.{nonce}.{self._mac('session', issued, nonce)}"

    def session_valid(self, value: str | None) -> bool:
        issued, nonce, mac = _three(value)
        if not same_secret(mac, self._mac("session", issued, nonce) if nonce else None):
            return False
        age = self.clock() - int(issued)
        with self._lock:
            revoked = nonce in self._revoked
        return 0 <= age < self.lifetime.total_seconds() and not revoked

    def revoke(self, value: str | None) -> None:
        """Sign ``value`` out on the server: a copy of the cookie kept elsewhere stops working.
        Remembered until the session would have expired anyway."""
        if not self.session_valid(value):
            return
        issued, nonce, _ = _three(value)
        now = self.clock()
        with self._lock:
            self._revoked = {n: until for n, until in self._revoked.items() if until > now}
            self._revoked[nonce] = int(issued) + self.lifetime.total_seconds()

    def new_csrf(self, session: str | None) -> str:
        nonce = secrets.token_urlsafe(16)
        return f"{nonce}.{self._mac('csrf', session or '', nonce)}"

    def csrf_valid(self, value: str | None, session: str | None) -> bool:
        nonce, _, mac = (value or "").partition(".")
        return bool(nonce) and same_secret(mac, self._mac("csrf", session or "", nonce))


def _three(value: str | None) -> tuple[str, str, str]:
    parts = (value or "").split(".")
    if len(parts) != 3 or not parts[0].isdecimal() or len(parts[0]) > 12:
        return "0", "", ""
    return parts[0], parts[1], parts[2]


def same_secret(given: str | None, expected: str | None) -> bool:
    """Constant-time equality of two secrets; a missing one never matches."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def authenticated(token: str | None, *, authorization: str | None,
                  session_valid: bool) -> bool:
    """True when no token is configured, or the request proves it knows it (a valid session,
    as :meth:`Signer.session_valid` judged it, or the token in ``authorization``)."""
    if token is None or session_valid:
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
