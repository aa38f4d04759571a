"""The scheduling loop and its parts: leadership of the lease, planning, submission, settlement
of finished runs and backfills, and the observer it reports to."""
