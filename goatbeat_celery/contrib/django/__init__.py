"""goatbeat in a Django project: add ``"goatbeat_celery.contrib.django"`` to INSTALLED_APPS.

* goatbeat's settings are read from Django's settings under the ``CELERY_`` namespace
  (``CELERY_GOATBEAT_DATABASE_URL``); left out, the database URL is built from
  ``DATABASES["default"]`` (PostgreSQL or SQLite).
* The admin lists schedules and their executions, and edits schedules through
  :class:`~goatbeat_celery.api.Schedules`: it reads goatbeat's tables through unmanaged models
  and never writes them itself.
* ``manage.py check --database default`` (and ``manage.py migrate``) warns when goatbeat's
  schema is behind; ``manage.py goatbeat_import_django_celery_beat`` copies
  django-celery-beat's periodic tasks.

Nothing here is imported by goatbeat itself unless Django is loaded and this app installed.
"""
