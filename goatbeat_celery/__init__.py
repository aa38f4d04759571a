"""goatbeat_celery: a Celery beat scheduler that several replicas can run at once, safely."""

__all__: list[str] = []
