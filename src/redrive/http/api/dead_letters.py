"""``/api/v1/dead-letters`` (operators): list with facets, read, annotate,
replay and resolve, by id or every open letter a filter matches."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations.
from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import Depends, Query

from redrive.errors import ConfigError
from redrive.http import responses as out
from redrive.http.api.callers import Answer, Operator, resource
from redrive.http.models import MAX_AGE_S, LetterBulkBody, NoteBody, ReplayBody, ResolveBody
from redrive.store.reads import page_size
from redrive.views import dead_letter_view, facets_view, job_view, page_view

router = resource("dead letters")


def letter_filters(
    error_class: str | None = None, stage: str | None = None, task: str | None = None,
    owner: str | None = None, state: Literal["open", "replayed", "resolved", "escalated"] | None = None,
    older_than_s: Annotated[float | None, Query(ge=0, le=MAX_AGE_S)] = None,
    newer_than_s: Annotated[float | None, Query(ge=0, le=MAX_AGE_S)] = None,
) -> dict[str, Any]:
    return {"error_class": error_class, "stage": stage, "task": task, "owner": owner, "state": state,
            "older_than": _age(older_than_s), "newer_than": _age(newer_than_s)}


Where = Annotated[dict[str, Any], Depends(letter_filters)]


@router.get("/dead-letters", response_model=out.paged(out.DeadLetter))
def dead_letters(ops: Operator, where: Where, cursor: str | None = None,
                 limit: Annotated[int, Query(ge=1)] = 50) -> Answer:
    """Newest first, with the CLI's filters; age is from the last failure."""
    return page_view(ops.dead_letters(**where, after=cursor, limit=page_size(limit)), dead_letter_view)


@router.get("/dead-letters/facets", response_model=out.Facets)
def dead_letter_facets(ops: Operator, where: Where) -> Answer:
    """How many match, by error class and by stage."""
    return facets_view(ops.dead_letter_facets(**where))


@router.get("/dead-letters/{letter_id}", response_model=out.DeadLetter)
def dead_letter(letter_id: int, ops: Operator) -> Answer:
    return dead_letter_view(ops.dead_letter(letter_id))


@router.post("/dead-letters/{letter_id}/notes", response_model=out.DeadLetter)
def note(letter_id: int, body: NoteBody, ops: Operator) -> Answer:
    """Add a resolution note, signed by the caller."""
    return dead_letter_view(ops.note(letter_id, body.text))


@router.post("/dead-letters/bulk", response_model=out.Bulk)
def letters_matching(body: LetterBulkBody, ops: Operator) -> Answer:
    """Replay or resolve every open dead letter the filter matches, in
    batches. Interrupted, the same call again does the rest. One audit
    entry with the filter and the count; with ``dry_run`` only the count."""
    chosen = body.filter
    where: dict[str, Any] = {"error_class": chosen.error_class, "stage": chosen.stage, "task": chosen.task,
                             "owner": chosen.owner, "older_than": _age(chosen.older_than_s),
                             "newer_than": _age(chosen.newer_than_s)}
    if body.action == "resolve":
        if body.from_start:
            raise ConfigError("from_start is for a replay; a resolve runs nothing")
        done = ops.resolve_matching(**where, note=body.note, dry_run=body.dry_run)
    else:
        if body.note is not None:
            raise ConfigError("a note goes with a resolve; to annotate, post to the letter's notes")
        done = ops.replay_matching(**where, from_start=body.from_start, dry_run=body.dry_run)
    return {"action": done.action, "matched": done.matched, "done": done.done, "skipped": done.skipped,
            "dry_run": done.dry_run}


@router.post("/dead-letters/replay", response_model=out.Replays)
def replay(body: ReplayBody, ops: Operator) -> Answer:
    """Run the letters' jobs again from the failed stage (or from the
    start); a letter replayed already is left alone (``job`` null)."""
    done = ops.replay(body.ids, from_start=body.from_start)
    return {"items": [{"dead_letter": dead_letter_view(r.letter),
                       "job": job_view(r.job) if r.job is not None else None} for r in done]}


@router.post("/dead-letters/resolve", response_model=out.DeadLetters)
def resolve(body: ResolveBody, ops: Operator) -> Answer:
    """Close open letters without running their jobs again, with an
    optional note saying why; they leave the open count and their jobs
    may be pruned. A letter replayed or resolved already is left as it
    is (its ``state`` says which)."""
    return {"items": [dead_letter_view(r.letter) for r in ops.resolve(body.ids, note=body.note)]}


def _age(seconds: float | None) -> timedelta | None:
    return None if seconds is None else timedelta(seconds=seconds)
