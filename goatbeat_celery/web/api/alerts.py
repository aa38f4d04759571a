"""Alerts over HTTP: the list (open ones first), and what a person does about an open one:
acknowledge it (``POST /alerts/{id}/ack``, a ``note``) or silence it until an instant
(``POST /alerts/{id}/silence``, ``until``). Each change is audited on the alert's schedule,
as made by the token, with the ``X-Goatbeat-Reason`` header's reason. A token limited to a
prefix sees only its schedules' alerts and changes only theirs."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from goatbeat_celery.core.rules.alerts import Alert
from goatbeat_celery.core.types.errors import AlertNotFound, ConfigurationError
from goatbeat_celery.core.types.problems import Problem
from goatbeat_celery.core.types.tokens import ApiToken
from goatbeat_celery.web.api.answers import json_response
from goatbeat_celery.web.api.context import Api
from goatbeat_celery.web.api.guard import readable, writable
from goatbeat_celery.web.api.reading import body, call, instant, query_bool, query_int, reason

#: The largest id an alert may have (a 64-bit integer): a bigger one is no alert.
_MAX_ID = 2**63 - 1


async def list_alerts(request: Request, api: Api, token: ApiToken) -> Response:
    """Open alerts, or with ``all=true`` resolved ones too after them; ``schedule``: one
    schedule's."""
    name = request.query_params.get("schedule") or None
    everything = query_bool(request, "all") or False
    limit = query_int(request, "limit", 100)
    if name is not None and not token.covers(name):
        return json_response({"alerts": []})
    found: list[Alert] = await call(api.schedules.alerts, name=name,
                                    open_only=not everything, limit=limit)
    return json_response({"alerts": [a.as_json() for a in found if token.covers(a.schedule_name)]})


async def _the_alert(request: Request, api: Api, token: ApiToken) -> int:
    """The alert the path names, readable and writable by ``token`` (404 / 403)."""
    text = request.path_params["id"]
    alert_id = int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else 0
    if not 1 <= alert_id <= _MAX_ID:
        raise AlertNotFound(alert_id)
    alert: Alert = await call(api.schedules.alert, alert_id)
    readable(token, alert.schedule_name, AlertNotFound(alert_id))
    writable(token, alert.schedule_name)
    return alert_id


async def acknowledge(request: Request, api: Api, token: ApiToken) -> Response:
    """Acknowledge: it stays open, shown as acknowledged, not told again when counted."""
    alert_id = await _the_alert(request, api, token)
    given = await body(request, optional=True)
    problems = [Problem(key, "unknown field", "use: note")
                for key in sorted(set(given) - {"note"})]
    note = given.get("note")
    if note is not None and not isinstance(note, str):
        problems.append(Problem("note", "expected text"))
    if problems:
        raise ConfigurationError(problems, subject=f"alert {alert_id}")
    alert = await call(api.schedules.acknowledge_alert, alert_id, note=note,
                       reason=reason(request))
    return json_response(alert.as_json())


async def silence(request: Request, api: Api, token: ApiToken) -> Response:
    """Silence until ``until``: nothing told before then; told again then if still open."""
    alert_id = await _the_alert(request, api, token)
    given = await body(request)
    problems = [Problem(key, "unknown field", "use: until")
                for key in sorted(set(given) - {"until"})]
    until = instant(given.get("until"), "until", problems)
    if until is None and not any(p.field == "until" for p in problems):
        problems.append(Problem("until", "required", "give the instant the silence ends"))
    if problems or until is None:
        raise ConfigurationError(problems, subject=f"alert {alert_id}")
    alert = await call(api.schedules.silence_alert, alert_id, until=until,
                       reason=reason(request))
    return json_response(alert.as_json())
