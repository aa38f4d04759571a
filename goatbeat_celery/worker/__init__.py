"""What a Celery worker runs: run tracking (:mod:`goatbeat_celery.worker.tracking`), which
records what the worker did with each run goatbeat sent."""
