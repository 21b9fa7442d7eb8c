"""Daily match offers on redrive: the matchmaking scheduler's idempotency
design (see README.md for which part implements what)."""
