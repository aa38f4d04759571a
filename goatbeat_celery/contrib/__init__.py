"""Integrations with other frameworks; each lives in its own subpackage and is imported only by
projects that use it (``goatbeat_celery.contrib.django``)."""
