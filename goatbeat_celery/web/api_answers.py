"""Kept for imports of the former location: :mod:`goatbeat_celery.web.api.answers`."""

from goatbeat_celery.web.api.answers import (
    ANSWERS,
    API_PREFIX,
    EXCEPTION_HANDLERS,
    HEADERS,
    PROBLEM_TYPE,
    http_exception,
    json_response,
    location,
    path_refusal,
    problem_response,
    server_error,
    translated,
)

__all__ = ["ANSWERS", "API_PREFIX", "EXCEPTION_HANDLERS", "HEADERS", "PROBLEM_TYPE",
           "http_exception", "json_response", "location", "path_refusal", "problem_response",
           "server_error", "translated"]
