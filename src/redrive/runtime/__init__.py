"""The worker: claim loop, execution, leases, completion, shutdown."""
