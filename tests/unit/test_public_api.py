"""The public surface is explicit, sorted and pinned."""

import redrive
from redrive import errors

PUBLIC = [
    "AdditiveJitter", "App", "ArgumentsNotSerializable", "Backoff", "BreakerMode", "BreakerPolicy",
    "BreakerStatus", "CircuitOpen", "Classifier", "ConfigError",
    "DEFAULT_CLASSIFIER", "DEFAULT_TAXONOMY", "DeadLetter", "DeadLetterNotFound", "Delivery", "Dependency",
    "EnqueueResult", "ErrorCode", "Failure", "Firing", "Fixed", "Forbidden", "FullJitter",
    "IdempotencyKeyReused", "IllegalTransition", "InProcessRetry", "Intent", "Job", "JobError", "JobEvent", "JobNotFound",
    "JobRequest", "Kind", "LeaseLost", "MemoryStore", "OutboxRow", "OutboxStatus", "Permanent", "PostgresStore",
    "ProportionalJitter", "RedriveError", "Replay", "SQLiteStore", "Schedule", "Scheduler", "SchemaOutdated", "Settings",
    "Stage", "Status", "Store", "StoreBusy", "StoreError", "StoreUnavailable", "Task",
    "Taxonomy", "Transient", "UnknownDependency", "UnknownTask", "Worker", "add_context", "current_job", "deliver", "guarded",
    "job_id_for", "open_store", "stage", "write_phase",
]


def test_all_is_pinned_and_sorted() -> None:
    assert redrive.__all__ == PUBLIC
    assert redrive.__all__ == sorted(redrive.__all__)
    for name in PUBLIC:
        assert getattr(redrive, name) is not None


def test_every_error_is_a_redrive_error_with_a_code_and_a_drawn_place_in_the_tree() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.RedriveError)
        assert cls.code.isupper()
        assert name in errors.__doc__, f"{name} is missing from the drawn tree"
        assert str(cls()) == cls.__doc__.strip().splitlines()[0]
