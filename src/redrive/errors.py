"""The exception tree of redrive.

Every error redrive raises is a ``RedriveError``; each carries a stable
``code`` (what the CLI and HTTP API show) and a one-line message. Driver errors
are chained as ``__cause__``, never shown to users.

    RedriveError
    ├── ConfigError                   settings, URLs or task declarations are wrong
    │   ├── UnknownTask               no task of that name is registered
    │   ├── UnknownDependency         no dependency of that name is declared
    │   └── ArgumentsNotSerializable  job arguments or a result are not JSON
    ├── StoreError                    the database could not do what was asked (worth retrying)
    │   ├── StoreUnavailable          the database cannot be reached
    │   │   └── StoreTimeout          no answer within the deadline: what was asked may or may not be done
    │   ├── StoreBusy                 the database stayed locked past our retries
    │   ├── StoreFull                 the disk (or the database's space) is full: nothing was written
    │   └── SchemaOutdated            migrations are pending: run `redrive migrate`
    ├── JobStateError                 the job is not in a state that allows it (retrying will not help)
    │   ├── IllegalTransition         a state change the job's state does not allow
    │   └── LeaseLost                 a running job's lease is gone: its writes are refused
    ├── JobNotFound                   no job has that id
    ├── ResultFailed                  a job whose result was awaited failed (its code and message)
    ├── ResultCancelled               a job whose result was awaited was cancelled
    ├── ResultTimeout                 a job's result did not come within the time given
    ├── DeadLetterNotFound            no dead letter has that id
    ├── WorkflowNotFound              no workflow has that id
    ├── Forbidden                     the caller may not act on that job
    ├── IdempotencyKeyReused          an idempotency key came back with other arguments
    └── JobError                      raised by task code to steer its job's outcome
        ├── Transient                 retry later (optionally after ``retry_after``)
        │   └── NotDelivered          an outbox send that certainly did not reach the provider
        ├── Permanent                 fail now with an error code, no retry
        ├── Cancelled                 end the job cancelled (when ``redrive.cancelled()`` says so)
        ├── Snooze                    run again after a delay, no attempt spent
        └── CircuitOpen               a guarded call found its dependency's breaker open
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

__all__ = [
    "ArgumentsNotSerializable",
    "Cancelled",
    "CircuitOpen",
    "ConfigError",
    "DeadLetterNotFound",
    "Forbidden",
    "IdempotencyKeyReused",
    "IllegalTransition",
    "JobError",
    "JobNotFound",
    "JobStateError",
    "LeaseLost",
    "NotDelivered",
    "Permanent",
    "RedriveError",
    "ResultCancelled",
    "ResultFailed",
    "ResultTimeout",
    "SchemaOutdated",
    "Snooze",
    "StoreBusy",
    "StoreError",
    "StoreFull",
    "StoreTimeout",
    "StoreUnavailable",
    "Transient",
    "UnknownDependency",
    "UnknownTask",
    "WorkflowNotFound",
]


class RedriveError(Exception):
    """redrive could not do what was asked."""

    code = "REDRIVE_ERROR"

    def __init__(self, message: str | None = None, **fields: Any) -> None:
        # The class docstring is the default message, so every raise site
        # yields a readable one-liner even when it passes no text.
        self.message = message or (self.__doc__ or self.code).strip().splitlines()[0]
        self.fields = fields
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class ConfigError(RedriveError):
    """The configuration is invalid."""

    code = "CONFIG_INVALID"


class UnknownTask(ConfigError):
    """No task of that name is registered."""

    code = "UNKNOWN_TASK"


class UnknownDependency(ConfigError):
    """No dependency of that name is declared."""

    code = "UNKNOWN_DEPENDENCY"


class ArgumentsNotSerializable(ConfigError):
    """The value is not JSON-serialisable."""

    code = "ARGS_NOT_JSON"


class StoreError(RedriveError):
    """The database could not complete the operation."""

    code = "STORE_ERROR"


class StoreUnavailable(StoreError):
    """The database cannot be reached."""

    code = "STORE_UNAVAILABLE"


class StoreTimeout(StoreUnavailable):
    """The database did not answer within the store's deadline, and the
    connection was dropped: what was asked may or may not have been done.
    Repeat it only where repeating is safe (an enqueue with an idempotency key)."""

    code = "STORE_TIMEOUT"


class StoreBusy(StoreError):
    """The database stayed locked by other writers past our retries."""

    code = "STORE_BUSY"


class StoreFull(StoreError):
    """The database's disk is full: the write was refused whole. Retrying
    works once space is freed."""

    code = "STORE_FULL"


class SchemaOutdated(StoreError):
    """The database schema is older than this version of redrive: run `redrive migrate`."""

    code = "SCHEMA_OUTDATED"


class JobStateError(RedriveError):
    """The job's state does not allow that."""

    code = "JOB_STATE"


class IllegalTransition(JobStateError):
    """The job's current state does not allow that change."""

    code = "ILLEGAL_TRANSITION"


class LeaseLost(JobStateError):
    """The job's lease is gone: another worker may be running it."""

    code = "LEASE_LOST"


class JobNotFound(RedriveError):
    """No job has that id."""

    code = "JOB_NOT_FOUND"


class WorkflowNotFound(RedriveError):
    """No workflow has that id."""

    code = "WORKFLOW_NOT_FOUND"


class ResultFailed(RedriveError):
    """The job whose result was awaited failed (``job.failed`` is the event of a job failing)."""

    code = "JOB_FAILED"

    def __init__(self, message: str | None = None, *, job_id: Any = None, error_code: str | None = None) -> None:
        super().__init__(message, job_id=job_id, error_code=error_code)
        self.job_id = job_id
        self.error_code = error_code  # the job's own code, such as GW_TIMEOUT


class ResultCancelled(RedriveError):
    """The job whose result was awaited was cancelled."""

    code = "JOB_CANCELLED"


class ResultTimeout(RedriveError):
    """The job did not finish within the time given."""

    code = "RESULT_TIMEOUT"


class DeadLetterNotFound(RedriveError):
    """No dead letter has that id."""

    code = "DEAD_LETTER_NOT_FOUND"


class Forbidden(RedriveError):
    """Only the job's owner or an operator may do that."""

    code = "FORBIDDEN"


class IdempotencyKeyReused(RedriveError):
    """That idempotency key was used before, at the same version, with other arguments."""

    code = "IDEMPOTENCY_KEY_REUSED"


class JobError(RedriveError):
    """Raised by task code to choose how its job ends.

    ``Transient`` and ``Permanent`` take the same arguments: a one-line
    message, then the error code by keyword (``Permanent("no such address",
    code="INVALID_RECIPIENT")``)."""

    code = "JOB_ERROR"


class Transient(JobError):
    """A transient failure: retry the job later."""

    code = "TRANSIENT"

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        retry_after: timedelta | None = None,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.retry_after = retry_after


class NotDelivered(Transient):
    """A send that certainly did not reach the provider (it answered an
    error, or could not be reached): raised from an outbox ``send``, the
    next attempt sends again without asking the provider first."""

    code = "NOT_DELIVERED"


class Permanent(JobError):
    """A permanent failure: fail the job now without retrying."""

    code = "PERMANENT"

    def __init__(self, message: str | None = None, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class Cancelled(JobError):
    """End the running job ``cancelled``: what a sync task raises once
    ``redrive.cancelled()`` is true. Raised without a cancel having been asked,
    it ends the job cancelled by the task itself."""

    code = "CANCELLED"


class Snooze(JobError):
    """Run this job again later, without spending an attempt.

    After ``delay``: the work is not ready yet (a file still uploading, a
    partner's report not out), which is not a failure. Snoozes are counted apart from attempts
    (the job's history shows each, numbered) and a task allows at most
    ``max_snoozes`` (``app.task(max_snoozes=...)``, 100 unless said): past
    them the job fails for good with ``SNOOZE_LIMIT``."""

    code = "SNOOZED"

    def __init__(self, delay: timedelta = timedelta(0)) -> None:
        if not isinstance(delay, timedelta) or delay < timedelta(0):
            raise ConfigError(f"Snooze takes a timedelta of zero or more, not {delay!r}")
        super().__init__()
        self.delay = delay


class CircuitOpen(JobError):
    """The dependency's circuit breaker is open: the call was not made."""

    code = "CIRCUIT_OPEN"

    def __init__(self, message: str | None = None, *, dependency: str = "") -> None:
        super().__init__(message)
        self.dependency = dependency


# The names these exceptions had until 0.1.0: kept importable, with a warning,
# because ``JobFailed`` and ``JobCancelled`` are the events (redrive.events).
_RENAMED = {"JobFailed": "ResultFailed", "JobCancelled": "ResultCancelled"}


def __getattr__(name: str) -> type[RedriveError]:
    if name in _RENAMED:
        import warnings

        warnings.warn(f"redrive.errors.{name} is now {_RENAMED[name]}", DeprecationWarning, stacklevel=2)
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module 'redrive.errors' has no attribute {name!r}")
