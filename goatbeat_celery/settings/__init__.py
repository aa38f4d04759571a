"""Settings read from ``app.conf`` beside :mod:`goatbeat_celery.config`: what a setting says,
validated, for the process that acts on it.

Every process reads its configuration (beat, a tracking worker, the CLI, the dashboard), so
these modules import neither beat nor the worker: only the core and the standard library.
"""
