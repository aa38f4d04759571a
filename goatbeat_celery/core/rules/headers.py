"""The headers a schedule may not set: kept in
:mod:`goatbeat_celery.core.types.reserved_headers`, beside the option checks that refuse them;
this name still imports them."""

from __future__ import annotations

from goatbeat_celery.core.types.reserved_headers import (
    CELERY_PROTOCOL_HEADERS,
    CELERY_REQUEST_NAMES,
    RESERVED_HEADERS,
    header_problems,
    reserved,
    without_reserved,
)

__all__ = ["CELERY_PROTOCOL_HEADERS", "CELERY_REQUEST_NAMES", "RESERVED_HEADERS",
           "header_problems", "reserved", "without_reserved"]
