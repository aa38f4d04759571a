"""Webhook URLs: what configuration accepts, and how a URL is shown.

A URL is checked whole when the settings are read, so that every later use (the request, the
log line naming it) works on a URL known to be sound: beat never fails at start, nor ``goatbeat
check`` with a traceback, on a URL that only looked like one. Problems name the setting and never
quote the URL: incoming-webhook URLs carry their secret in the path or query.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import SplitResult, urlsplit

from goatbeat_celery.core.types.problems import Problem

SCHEMES = ("http", "https")


class Target(NamedTuple):
    """Where a request goes: ``https``, the host (IPv6 without brackets), the port (the
    scheme's default when the URL gives none) and the request target (path and query)."""

    tls: bool
    host: str
    port: int
    path: str


def url_problems(url: str, where: str) -> list[Problem]:
    """What is wrong with the webhook URL ``url`` (given as ``where``), every problem at once;
    an empty list when it can be sent to."""
    found: list[Problem] = []
    if not url.isascii():
        found.append(Problem(where, "contains characters outside ASCII",
                             "percent-encode them (a host name in its xn-- form)"))
    if any(char.isspace() or not char.isprintable() for char in url):
        found.append(Problem(where, "contains spaces or control characters",
                             "percent-encode them (a space as %20)"))
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed "[" around an IPv6 host, say
        found.append(Problem(where, "is not a valid URL (its host cannot be read)",
                             "write an IPv6 host in brackets, as http://[::1]:8080/path"))
        return found
    if parts.scheme not in SCHEMES:
        # The scheme only: the rest of a URL may be its secret.
        found.append(Problem(where, f"must be an http:// or https:// URL, got a "
                             f"{parts.scheme or 'relative'} one"))
        return found
    if not parts.hostname:
        found.append(Problem(where, "has no host", "give the receiver's full URL"))
    if "@" in parts.netloc:
        found.append(Problem(where, "has credentials before the host, which are never sent",
                             "put what the receiver checks in the path or query, and verify "
                             "the signature"))
    if _port(parts) is None:
        found.append(Problem(where, "has an invalid port",
                             "give a port from 1 to 65535 after the host, or none for the "
                             "scheme's default"))
    return found


def _port(parts: SplitResult) -> int | None:
    """The URL's port (the scheme's default when it gives none); None when it is not one."""
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        return None
    if port is None:
        # "host:" with nothing after the colon reads as no port: let it mean the default.
        return 443 if parts.scheme == "https" else 80
    return port if 1 <= port <= 65535 else None


def target(url: str) -> Target:
    """Where a URL that :func:`url_problems` accepted sends its request."""
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(tls=parts.scheme == "https", host=parts.hostname or "",
                  port=_port(parts) or 0, path=path)


def shown_url(url: str) -> str:
    """``scheme://host/…``: where a webhook goes, without the path or query that may hold its
    secret. Never raises, whatever ``url`` is."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = parts.port
    except ValueError:
        return "(an invalid URL)"
    if not (host.isascii() and host.isprintable()) or parts.scheme not in SCHEMES:
        return "(an invalid URL)"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}/…"
