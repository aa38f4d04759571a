"""The Celery app of the workers page's tests: a worker of it is started on a queue of the
test's own, its remote control on an exchange of the test's own (GOATBEAT_WORKERS_* variables),
so no other worker on the same Redis answers it."""

from __future__ import annotations

import os
import time

from celery import Celery

app = Celery("workerproj", broker=os.environ.get("GOATBEAT_WORKERS_BROKER", "memory://"),
             backend=os.environ.get("GOATBEAT_WORKERS_BROKER"), set_as_current=False)
app.conf.update(control_exchange=os.environ.get("GOATBEAT_WORKERS_CONTROL", "celery"),
                worker_prefetch_multiplier=1, broker_connection_retry_on_startup=True)


@app.task(name="workerproj.slow")
def slow(seconds: float) -> str:
    # The work a revoke with terminate interrupts: a task that is still running when asked.
    time.sleep(seconds)
    return "done"
