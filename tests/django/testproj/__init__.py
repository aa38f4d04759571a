"""A small Django project for the tests of goatbeat_celery.contrib.django."""
