"""Webhook URLs: kept in :mod:`goatbeat_celery.settings.webhook_urls`, where the settings are
read; this name still imports them."""

from __future__ import annotations

from goatbeat_celery.settings.webhook_urls import SCHEMES, Target, shown_url, target, url_problems

__all__ = ["SCHEMES", "Target", "shown_url", "target", "url_problems"]
