"""The OpenAPI 3.1 description of the JSON API (:mod:`goatbeat_celery.web.api`), served at
``/api/v1/openapi.json``. ``tests/web/test_api_openapi.py`` validates it and checks that it
lists exactly the routes the application serves."""

from __future__ import annotations

from typing import Any

from goatbeat_celery import __version__, spec_input
from goatbeat_celery.api.bulk import BULK_ACTIONS, MAX_BULK
from goatbeat_celery.core.links import doc
from goatbeat_celery.core.rules.controls import MAX_FILTER_TAGS
from goatbeat_celery.solar import EVENTS

_REF = "#/components/schemas/"
_PROBLEM = {"application/problem+json": {"schema": {"$ref": _REF + "Problem"}}}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": _REF + name}


def _body(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _problems(*statuses: int) -> dict[str, Any]:
    said = {400: "Unreadable request, or a Host this server does not answer to",
            401: "No token, or an unknown or revoked one",
            403: "Missing scope, a name outside the token's prefix, another site, read-only",
            404: "No such resource (or outside the token's prefix, for a read)",
            409: "Conflict: defined in configuration, a calendar in use, a concurrent edit",
            412: "If-Match names another version (the edit would overwrite another)",
            415: "The body is not JSON", 422: "Invalid input: every problem, each with its field"}
    return {str(s): {"description": said[s], "content": _PROBLEM} for s in statuses}


def _bulk_refused() -> dict[str, Any]:
    """A bulk action's answers when every schedule was refused: the problem with the lists."""
    content = {"application/problem+json": {"schema": _ref("BulkRefused")}}
    said = {403: "Every schedule refused, one outside the token's prefix (none for its "
                 "state), or a missing scope, another site, read-only",
            404: "Every schedule refused: none exists",
            409: "Every schedule refused, one for its state (already paused, not paused, "
                 "set aside)"}
    either = {"application/problem+json": {"schema": {"anyOf": [
        _ref("BulkRefused"), _ref("Problem")]}}}
    return {str(s): {"description": text, "content": either if s == 403 else content}
            for s, text in said.items()}


_ETAG = {"ETag": {"description": "The definition's version, quoted: give it as If-Match",
                  "schema": {"type": "string"}}}
_REASON = {"name": "X-Goatbeat-Reason", "in": "header", "required": False,
           "description": "Why: recorded with the change in the audit log",
           "schema": {"type": "string"}}
_IF_MATCH = {"name": "If-Match", "in": "header", "required": False,
             "description": 'The ETag read ("3"): the edit applies only to that version; '
                            "* : only to an existing one",
             "schema": {"type": "string"}}
_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
_READ = [400, 401, 403, 404]
_WRITE = [400, 401, 403, 404, 409, 415, 422]


def _op(summary: str, scope: str, responses: dict[str, Any], *,
        parameters: list[dict[str, Any]] | None = None,
        body: dict[str, Any] | None = None) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": summary, "security": [{"bearer": [scope]}],
                                 "responses": responses}
    if scope != "read":
        parameters = [*(parameters or []), _REASON]
    if parameters:
        operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": body}}}
    return operation


def _query(name: str, description: str, kind: str = "string") -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": {"type": kind}}


def _schemas() -> dict[str, Any]:
    loose = {"type": "object", "additionalProperties": True}
    definition_fields: dict[str, Any] = {
        "task": {"type": "string"},
        "every": {"type": ["number", "string"], "description": "Seconds, or 90s, 1h30m"},
        "cron": {"type": "string"},
        "at": {"type": "string", "format": "date-time"},
        "rrule": {"type": "string", "description": "An RFC 5545 recurrence rule, read in "
                  "timezone: FREQ=WEEKLY;BYDAY=TU;BYHOUR=9;BYMINUTE=0 (from midnight of today "
                  "there without a DTSTART line)"},
        "solar": {"oneOf": [
            {"type": "object", "required": list(spec_input.SOLAR_PARAMS),
             "additionalProperties": False, "properties": {
                 "event": {"type": "string", "enum": list(EVENTS)},
                 "latitude": {"type": "number", "minimum": -90, "maximum": 90},
                 "longitude": {"type": "number", "minimum": -180, "maximum": 180}}},
            {"type": "array", "minItems": 3, "maxItems": 3,
             "description": "The event, the latitude and the longitude, in that order"}],
            "description": "Celery's solar event at a place (degrees north and east)"},
        "timezone": {"type": "string", "description": "The IANA zone cron and rrule are read "
                     "in (default: the app's)"},
        "day_or": {"type": "boolean"},
        "enabled": {"type": "boolean"},
        "args": {"type": "array"},
        "kwargs": {"type": "object"},
        "options": {"type": "object"},
        "rotate": {"type": "array", "items": {"type": "string"},
                   "description": "Queues to rotate over: occurrence k goes to queue k mod N "
                                  "(at least two; empty: no rotation)"},
        "rotate_handover": {"type": "boolean", "description": "An occurrence whose queue "
                            "nobody consumes goes to the next queue somebody does"},
    }
    for key in spec_input.SPEC_FIELDS:
        definition_fields.setdefault(key, {})
    return {
        "Problem": {"type": "object", "required": ["title", "status", "detail"], "properties": {
            "type": {"type": "string"}, "title": {"type": "string"},
            "status": {"type": "integer"}, "detail": {"type": "string"},
            "problems": {"type": "array", "items": {
                "type": "object", "required": ["field", "message", "hint"], "properties": {
                    "field": {"type": "string"}, "message": {"type": "string"},
                    "hint": {"type": "string"}}}}}},
        "Definition": {"type": "object", "properties": definition_fields,
                       "additionalProperties": False,
                       "description": "A schedule as written: one of every, cron, at, rrule "
                                      "or solar. "
                                      "Durations in seconds or with units; instants in "
                                      "ISO-8601 with an offset."},
        "Schedule": {**loose, "description": "What `goatbeat show --json` prints; version is "
                                             "the definition's, as the ETag says"},
        "ScheduleList": {"type": "object", "properties": {
            "schedules": {"type": "array", "items": _ref("Schedule")},
            "next": {"type": ["string", "null"], "description": "The next page's link"}}},
        "Run": loose,
        "Runs": {"type": "object", "properties": {"runs": {"type": "array",
                                                           "items": _ref("Run")}}},
        "Backfill": loose,
        "Backfills": {"type": "object", "properties": {
            "backfills": {"type": "array", "items": _ref("Backfill")}}},
        "BackfillRequest": {"type": "object", "required": ["start", "end"], "properties": {
            "start": {"type": "string", "format": "date-time"},
            "end": {"type": "string", "format": "date-time"},
            "mode": {"type": "string", "enum": ["missing", "failed", "all"]},
            "newest_first": {"type": "boolean"}, "per_tick": {"type": "integer"},
            "dry_run": {"type": "boolean"}}, "additionalProperties": False},
        "Pause": {"type": "object", "properties": {
            "note": {"type": "string"}, "until": {"type": "string", "format": "date-time"}},
            "additionalProperties": False},
        "BulkSelection": {"type": "object", "properties": {
            "names": {"type": "array", "items": {"type": "string"},
                      "description": f"The schedules (at most {MAX_BULK})"},
            "tag": {"type": "string", "description": "Every schedule carrying it, instead"},
            "until": {"type": "string", "format": "date-time",
                      "description": "A pause's end (pause only)"},
            "note": {"type": "string", "description": "Shown with the pause (pause only)"}},
            "additionalProperties": False},
        "BulkResult": {"type": "object", "required": ["action", "done", "refused"],
                       "properties": {
            "action": {"type": "string", "enum": list(BULK_ACTIONS)},
            **{key: {"type": "array", "items": {
                "type": "object", "required": ["name", "done", "reason"], "properties": {
                    "name": {"type": "string"}, "done": {"type": "boolean"},
                    "reason": {"type": "string", "description": "What was done, or why not"},
                    "run_key": {"type": "string", "description": "The run queued (run)"},
                    "refusal": {"type": "string", "enum": ["conflict", "not_found", "outside"],
                                "description": "Why, as a kind (refused only)"}}}}
               for key in ("done", "refused")}}},
        "BulkRefused": {"description": "Every schedule refused, nothing changed: a problem "
                        "carrying the action's lists", "allOf": [
                            _ref("Problem"), _ref("BulkResult")]},
        "Alert": {"type": "object", "description": "What `goatbeat alerts --json` prints "
                  "for one alert: acknowledged_* and silenced_* null unless set"},
        "Alerts": {"type": "object", "properties": {"alerts": {"type": "array",
                                                               "items": _ref("Alert")}}},
        "Acknowledgement": {"type": "object", "properties": {"note": {"type": "string"}},
                            "additionalProperties": False},
        "Silence": {"type": "object", "required": ["until"], "properties": {
            "until": {"type": "string", "format": "date-time"}},
            "additionalProperties": False},
        "Calendar": loose,
        "CalendarDefinition": {"type": "object", "properties": {
            "dates": {"type": "array", "items": {"type": "string", "format": "date"}},
            "ranges": {"type": "array", "items": {"type": "string"}},
            "description": {"type": ["string", "null"]}}},
        "Calendars": {"type": "object", "properties": {
            "calendars": {"type": "array", "items": _ref("Calendar")}}},
    }


def _ok(schema: str, description: str = "OK", headers: dict[str, Any] | None = None
        ) -> dict[str, Any]:
    found = _body(_ref(schema), description)
    if headers:
        found["headers"] = headers
    return found


def document(server: str = "/api/v1") -> dict[str, Any]:
    """The OpenAPI document, its server at ``server`` (the mount path and ``/api/v1``)."""
    schedule = {"200": _ok("Schedule", headers=_ETAG)}
    named = "/schedules/{name}"
    paths: dict[str, Any] = {
        "/schedules": {"get": _op("List schedules, by name or next run, a page at a time",
                                  "read", {"200": _ok("ScheduleList"), **_problems(*_READ, 422)},
                                  parameters=[
            _query("prefix", "Names starting with it"),
            _query("state", "enabled, paused or set-aside"),
            _query("source", "config or api"),
            _query("tag", f"Carrying it (repeatable, at most {MAX_FILTER_TAGS})"),
            _query("order", "name (default) or next_run"),
            _query("limit", "1 to 1000 (100)", "integer"),
            _query("after", "The last name of the previous page (from next)"),
            _query("after_run", "Its next run, with order=next_run (from next)")])},
        named: {
            "parameters": [_NAME],
            "get": _op("One schedule", "read", {**schedule, **_problems(*_READ)}),
            "put": _op("Create or replace the whole definition (idempotent)", "write",
                       {**schedule, "201": _ok("Schedule", "Created", _ETAG),
                        **_problems(*_WRITE, 412)},
                       parameters=[_IF_MATCH, {
                           "name": "If-None-Match", "in": "header", "required": False,
                           "description": "* : only create", "schema": {"type": "string"}}],
                       body=_ref("Definition")),
            "patch": _op("Change the fields given", "write",
                         {**schedule, **_problems(*_WRITE, 412)}, parameters=[_IF_MATCH],
                         body=_ref("Definition")),
            "delete": _op("Remove it; its runs stay as history", "write",
                          {"204": {"description": "Removed"}, **_problems(*_WRITE)}),
        },
        named + "/pause": {"parameters": [_NAME], "post": _op(
            "Pause, until resumed or until an instant", "write",
            {**schedule, **_problems(*_WRITE)}, body=_ref("Pause"))},
        named + "/resume": {"parameters": [_NAME], "post": _op(
            "Resume from the next occurrence", "write", {**schedule, **_problems(*_WRITE)})},
        named + "/run": {"parameters": [_NAME], "post": _op(
            "Run now: an extra run under its own key", "run",
            {"202": _ok("Run", "Queued"), **_problems(*_WRITE)})},
        **{f"/bulk/{path}": {"post": _op(
            f"{summary} every schedule named or carrying the tag, each answered on its own "
            "(done, or refused with why: not found, already paused, set aside...)", scope,
            {"200": _ok("BulkResult", "One schedule done at least; the others refused, "
                        "each with why"),
             **_problems(400, 401, 403, 415, 422), **_bulk_refused()},
            body=_ref("BulkSelection"))}
           for path, summary, scope in (("pause", "Pause", "write"),
                                        ("resume", "Resume", "write"),
                                        ("run", "Run now", "run"))},
        named + "/history": {"parameters": [_NAME], "get": _op(
            "Its runs, newest first", "read", {"200": _ok("Runs"), **_problems(*_READ, 422)},
            parameters=[_query("limit", "1 to 1000 (20)", "integer")])},
        named + "/next": {"parameters": [_NAME], "get": _op(
            "When its next runs are due", "read",
            {"200": _body({"type": "object", "properties": {"next_runs": {
                "type": "array", "items": {"type": "string", "format": "date-time"}}}}, "OK"),
             **_problems(*_READ, 422)},
            parameters=[_query("count", "1 to 1000 (5)", "integer")])},
        named + "/audit": {"parameters": [_NAME], "get": _op(
            "Its changes, newest first: who, why, each field before and after", "read",
            {"200": _body({"type": "object", "properties": {
                "entries": {"type": "array", "items": {"type": "object"}},
                "next": {"type": ["string", "null"]}}}, "OK"), **_problems(*_READ, 422)},
            parameters=[_query("limit", "1 to 1000 (50)", "integer"),
                        _query("before_id", "Older than this entry (from next)", "integer")])},
        named + "/backfills": {
            "parameters": [_NAME],
            "get": _op("Its backfills, newest first", "read",
                       {"200": _ok("Backfills"), **_problems(*_READ)}),
            "post": _op("Run past occurrences (dry_run: only say which)", "run",
                        {"200": _ok("Backfill", "What would run (dry_run)"),
                         "201": _ok("Backfill", "Stored"), **_problems(*_WRITE)},
                        body=_ref("BackfillRequest"))},
        "/backfills": {"get": _op("Backfills, newest first", "read",
                                  {"200": _ok("Backfills"), **_problems(*_READ, 422)},
                                  parameters=[_query("schedule", "Of this schedule"),
                                              _query("active", "true or false", "boolean"),
                                              _query("limit", "1 to 1000 (100)", "integer")])},
        "/backfills/{id}": {"parameters": [_ID], "get": _op(
            "One backfill, its progress and its outcomes (its runs by outcome, its re-runs, "
            "the occurrences whose latest run failed)", "read",
            {"200": _ok("Backfill"), **_problems(*_READ)})},
        "/backfills/{id}/rerun-failed": {"parameters": [_ID], "post": _op(
            "Run its failed occurrences again, now, under new keys", "run",
            {"201": _body({"type": "object", "properties": {
                "backfill": {"type": "integer"}, "schedule": {"type": "string"},
                "round": {"type": "integer"},
                "runs": {"type": "array", "items": {"type": "object"}}}}, "Queued"),
             **_problems(*_READ, 409, 422)})},
        "/audit/{id}/revert": {"parameters": [_ID], "post": _op(
            "Undo a recorded edit: its fields set back, refused if they changed since",
            "write", {"200": _ok("Schedule", headers=_ETAG), **_problems(*_READ, 409, 422)})},
        "/backfills/{id}/cancel": {"parameters": [_ID], "post": _op(
            "Cancel: nothing more is claimed for it", "run",
            {"200": _ok("Backfill"), **_problems(*_READ)})},
        "/alerts": {"get": _op("Alerts, open ones first", "read",
                               {"200": _ok("Alerts"), **_problems(*_READ, 422)},
                               parameters=[_query("schedule", "Of this schedule"),
                                           _query("all", "true: resolved ones too", "boolean"),
                                           _query("limit", "1 to 1000 (100)", "integer")])},
        "/alerts/{id}/ack": {"parameters": [_ID], "post": _op(
            "Acknowledge an open alert: it stays open, not told again when counted again",
            "write", {"200": _ok("Alert"), **_problems(*_WRITE)},
            body=_ref("Acknowledgement"))},
        "/alerts/{id}/silence": {"parameters": [_ID], "post": _op(
            "Silence an open alert until an instant: told again then if still open", "write",
            {"200": _ok("Alert"), **_problems(*_WRITE)}, body=_ref("Silence"))},
        "/calendars": {"get": _op("Exclusion calendars, by name", "read",
                                  {"200": _ok("Calendars"), **_problems(*_READ)})},
        "/calendars/{name}": {
            "parameters": [_NAME],
            "get": _op("One calendar and the schedules observing it", "read",
                       {"200": _ok("Calendar", headers=_ETAG), **_problems(*_READ)}),
            "put": _op("Create or replace a calendar", "write",
                       {"200": _ok("Calendar", headers=_ETAG),
                        "201": _ok("Calendar", "Created", _ETAG), **_problems(*_WRITE, 412)},
                       parameters=[_IF_MATCH], body=_ref("CalendarDefinition")),
            "delete": _op("Remove a calendar no schedule observes", "write",
                          {"204": {"description": "Removed"}, **_problems(*_WRITE)})},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "goatbeat", "version": __version__,
                 "description": f"Schedules of goatbeat_celery over HTTP ({doc('api.md')})."},
        "servers": [{"url": server}],
        "paths": paths,
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {"bearer": {
                "type": "http", "scheme": "bearer",
                "description": "A token from `celery -A proj goatbeat token create`"}},
        },
    }
