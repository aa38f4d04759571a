"""What the beat process runs: the Celery ``Scheduler`` that drives the core's engine, the
submitter that hands occurrences to the broker, and the observers (signals, the occurrence
hook, Prometheus metrics) it reports to."""
