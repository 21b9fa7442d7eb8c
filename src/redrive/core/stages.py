"""Stages: a task as a pipeline of named steps, each with its own attempt budget.

A failure in one stage spends nothing of another's budget. A finished stage's
output is saved (the job's checkpoint), so a retry or a replay resumes at the
first stage without one. A plain task is a one-stage pipeline whose budget is
the job's ``max_attempts``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from redrive.core.backoff import Backoff, FullJitter
from redrive.errors import ConfigError

DEFAULT_STAGE_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    max_attempts: int = DEFAULT_STAGE_ATTEMPTS
    backoff: Backoff = field(default_factory=FullJitter)
    timeout: timedelta | None = None  # one run of this stage; past it the attempt fails TIMEOUT

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip() or len(self.name) > 100:
            raise ConfigError("a stage name must be a non-empty string of at most 100 characters")
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ConfigError(f"stage {self.name!r}: max_attempts must be an integer of at least 1")
        check_timeout(self.timeout, f"stage {self.name!r}")


def check_timeout(timeout: timedelta | None, what: str) -> None:
    if timeout is not None and (not isinstance(timeout, timedelta) or timeout <= timedelta(0)):
        raise ConfigError(f"{what}: timeout must be a timedelta longer than zero, not {timeout!r}")


def pipeline(stages: Sequence[Stage | str]) -> tuple[Stage, ...]:
    """Validate a declaration; bare names get the default budget and backoff."""
    declared = tuple(s if isinstance(s, Stage) else Stage(s) for s in stages)
    if not declared:
        raise ConfigError("stages= needs at least one stage")
    names = [s.name for s in declared]
    if len(set(names)) != len(names):
        raise ConfigError(f"stage names must be unique, got {', '.join(names)}")
    return declared


def resume_at(stages: Sequence[Stage], checkpoint: Mapping[str, object]) -> Stage:
    """The first stage without saved output (the last one when all have it)."""
    for stage in stages:
        if stage.name not in checkpoint:
            return stage
    return stages[-1]


def next_after(stages: Sequence[Stage], name: str) -> str | None:
    names = [s.name for s in stages]
    index = names.index(name)
    return names[index + 1] if index + 1 < len(names) else None
