"""``goatbeat_metrics_port`` needs prometheus-client: whether it can be had, asked where the
settings are read, so that a missing extra is reported with every other configuration problem.

The exporter itself is :mod:`goatbeat_celery.beat.metrics`; this module imports nothing of beat,
and prometheus-client only when asked.
"""

from __future__ import annotations

from types import ModuleType

from goatbeat_celery.core.links import doc
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.core.types.problems import Problem

__all__ = ["INSTALL_HINT", "SETTING", "client_problems", "prometheus_client"]

SETTING = "goatbeat_metrics_port"
INSTALL_HINT = ("install goatbeat with its 'metrics' extra, which brings prometheus-client "
                f"({doc('getting-started.md#install')})")
_MISSING = Problem(SETTING, "metrics need prometheus-client, which is not installed",
                   INSTALL_HINT)


def prometheus_client() -> ModuleType:
    """The prometheus-client module; ConfigurationError naming the extra when it is missing."""
    try:
        import prometheus_client as client
    except ImportError as exc:
        raise ConfigurationError([_MISSING]) from exc
    return client


def client_problems() -> list[Problem]:
    """The configuration problem of a metrics port without prometheus-client, if any."""
    try:
        prometheus_client()
    except ConfigurationError as exc:
        return list(exc.details)
    return []
