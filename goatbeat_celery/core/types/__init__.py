"""The data the core reasons about: schedule specs and stored schedules, executions, the records
one tick of the engine passes around, leases, settings, and the errors and problems it raises."""
