"""Stages, dead letters, replay and manual retry: the store's side, on every store."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta

import pytest

from redrive.core.dead_letters import Revival, revive_plan
from redrive.core.job import DeadLetterFilter, Lease, StageDone
from redrive.core.states import Status
from redrive.core.transitions import LEASE_EXPIRED, Completion, RetryLater
from redrive.errors import ConfigError, DeadLetterNotFound
from redrive.store.port import Store
from redrive.store.reads import JobFilter
from redrive.testing import applied, assert_history, claim_one, fail, letter_of, new, reclaim, revive, wait_for


def test_a_finished_stage_is_saved_fenced_on_the_lease(store: Store) -> None:
    store.jobs_insert(jobs=[new(stage="fetch")])
    job = claim_one(store)
    assert job.stage == "fetch" and job.checkpoint == {} and job.stage_attempts == {}
    stale = StageDone(Lease(job.id, uuid.uuid4()), "fetch", {"doc": 1}, {"fetch": 1}, "llm")
    assert store.stages_save(items=[stale]) == set()
    done = StageDone(job.lease, "fetch", {"doc": "d1", "n": [1, 2]}, {"fetch": 1}, "llm")
    assert store.stages_save(items=[done]) == {job.lease}
    saved = store.job_get(job_id=job.id)
    assert (saved.stage, saved.checkpoint, saved.stage_attempts) == (
        "llm", {"fetch": {"doc": "d1", "n": [1, 2]}}, {"fetch": 1})
    # A retry records the failed stage's count and keeps the checkpoint
    retry = RetryLater(job.lease, timedelta(0), "UPSTREAM_5XX", "503", stage="llm",
                       stage_attempts={"fetch": 1, "llm": 1})
    assert applied(store.jobs_finish([retry])) == {job.lease}
    retried = store.job_get(job_id=job.id)
    assert retried.stage_attempts == {"fetch": 1, "llm": 1} and "fetch" in retried.checkpoint
    assert retried.first_failed_at is not None
    assert assert_history(store, job.id)[-1].meta["stage"] == "llm"


def test_failing_writes_a_dead_letter_in_the_same_step(store: Store) -> None:
    store.jobs_insert(jobs=[new(task="criticize", stage="fetch")])
    job = claim_one(store)
    fail(store, job, "UPSTREAM_5XX", retryable=True, stage="llm",
         stage_attempts={"fetch": 1, "llm": 5}, stack="Traceback ... [REDACTED]",
         context={"request_id": "r-1", "upstream_status": 503}, meta={"duration_ms": 7})
    failed = store.job_get(job_id=job.id)
    assert failed.status is Status.FAILED and failed.stage == "llm"
    letter = letter_of(store, job.id)
    assert (letter.task, letter.error_class, letter.error_code, letter.stage) == (
        "criticize", "UPSTREAM_5XX", "UPSTREAM_5XX", "llm")
    assert letter.stage_attempts == {"fetch": 1, "llm": 5} and letter.attempts == 1
    assert letter.retryable and not letter.escalated and letter.state == "open"
    assert letter.context == {"request_id": "r-1", "upstream_status": 503}
    assert letter.last_stack == "Traceback ... [REDACTED]"
    assert letter.first_failure_at <= letter.last_failure_at
    assert store.dead_letter_get(id=letter.id) == letter
    event = assert_history(store, job.id)[-1]
    assert event.meta["dead_letter_id"] == letter.id and event.meta["duration_ms"] == 7
    assert event.meta["error_class"] == "UPSTREAM_5XX" and event.meta["stage"] == "llm"


def test_a_replay_resumes_at_the_failed_stage_and_happens_once(store: Store) -> None:
    store.jobs_insert(jobs=[new(stage="fetch")])
    job = claim_one(store)
    store.stages_save(items=[StageDone(job.lease, "fetch", "page", {"fetch": 1}, "llm")])
    fail(store, job, stage="llm", stage_attempts={"fetch": 1, "llm": 2})
    letter = letter_of(store, job.id)
    revived = revive(store, job.id, "replay", by="ops", dead_letter_id=letter.id)
    assert revived is not None and revived.status is Status.QUEUED
    assert (revived.stage, revived.checkpoint, revived.stage_attempts) == ("llm", {"fetch": "page"}, {"fetch": 1})
    assert (revived.attempts, revived.error_code, revived.failed_at) == (0, None, None)
    assert revived.manual_retry_count == 0
    replayed = store.dead_letter_get(id=letter.id)
    assert (replayed.state, replayed.replayed_by, replayed.replay_from) == ("replayed", "ops", "stage")
    # A second replay of the same letter changes nothing
    assert revive(store, job.id, "replay", by="ops", dead_letter_id=letter.id) is None
    event = assert_history(store, job.id)[-1]
    assert event.meta == {"reason": "replay", "by": "ops", "from": "stage", "stage": "llm",
                          "dead_letter_ids": [letter.id]}
    assert claim_one(store).attempts == 1


def test_a_replay_from_the_start_drops_saved_output(store: Store) -> None:
    store.jobs_insert(jobs=[new(stage="fetch")])
    job = claim_one(store)
    store.stages_save(items=[StageDone(job.lease, "fetch", "page", {"fetch": 1}, "llm")])
    fail(store, job, stage="llm")
    revived = revive(store, job.id, "replay", by=None, from_start=True, first_stage="fetch")
    assert (revived.stage, revived.checkpoint, revived.stage_attempts) == ("fetch", {}, {})
    assert letter_of(store, job.id).replay_from == "start"


def test_manual_retry_counts_and_only_revives_failed_jobs(store: Store) -> None:
    queued, running = [r.job for r in store.jobs_insert(jobs=[new(), new()])]
    job = claim_one(store)
    other = queued if job.id == running.id else running
    assert revive(store, other.id, "manual_retry", by="alice") is None
    assert revive(store, uuid.uuid4(), "manual_retry", by="alice", job=other) is None
    fail(store, job)
    revived = revive(store, job.id, "manual_retry", by="alice")
    assert revived.manual_retry_count == 1 and revived.status is Status.QUEUED
    # the job's dead letter is no longer open: it was retried
    assert letter_of(store, job.id).state == "replayed"
    assert assert_history(store, job.id)[-1].meta["reason"] == "manual_retry"


def test_the_same_non_retryable_failure_after_a_replay_is_escalated(store: Store) -> None:
    store.jobs_insert(jobs=[new(), new()])
    first, second = claim_one(store), claim_one(store)
    for job in (first, second):
        fail(store, job, "VALIDATION_FAILED")
        revive(store, job.id, "replay", by="ops",
                         dead_letter_id=letter_of(store, job.id).id)
    again = [claim_one(store), claim_one(store)]
    by_id = {j.id: j for j in again}
    fail(store, by_id[first.id], "VALIDATION_FAILED")  # same class: escalated
    fail(store, by_id[second.id], "AUTH_DENIED")  # another class: not
    escalated = letter_of(store, first.id)
    assert escalated.escalated and escalated.previous_id is not None
    assert not letter_of(store, second.id).escalated
    assert [d.job_id for d in store.dead_letters_page(where=DeadLetterFilter(state="escalated")).items] == [first.id]
    assert assert_history(store, first.id)[-1].meta["escalated"] is True
    # An escalated letter is an open one: once replayed it is listed as replayed, not as escalated
    revive(store, first.id, "replay", by="ops", dead_letter_id=escalated.id)
    assert store.dead_letters_page(where=DeadLetterFilter(state="escalated")).items == []
    assert escalated.id in {d.id for d in store.dead_letters_page(where=DeadLetterFilter(state="replayed")).items}
    assert store.dead_letter_facets(where=DeadLetterFilter(state="escalated")).total == 0


def test_dead_letters_filter_and_take_notes(store: Store) -> None:
    store.jobs_insert(jobs=[new(task="a"), new(task="b")])
    for job in (claim_one(store), claim_one(store)):
        fail(store, job, "NOT_FOUND" if job.task == "a" else "AUTH_DENIED",
             stage="fetch" if job.task == "a" else "notify")
    every = DeadLetterFilter()
    assert len(store.dead_letters_page(where=every)) == 2
    assert [d.task for d in store.dead_letters_page(where=DeadLetterFilter(error_class="NOT_FOUND")).items] == ["a"]
    assert [d.task for d in store.dead_letters_page(where=DeadLetterFilter(stage="notify")).items] == ["b"]
    assert [d.task for d in store.dead_letters_page(where=DeadLetterFilter(task="b")).items] == ["b"]
    assert store.dead_letters_page(where=DeadLetterFilter(owner="nobody")).items == []
    assert len(store.dead_letters_page(where=DeadLetterFilter(newer_than=timedelta(hours=1)))) == 2
    assert store.dead_letters_page(where=DeadLetterFilter(older_than=timedelta(hours=1))).items == []
    assert len(store.dead_letters_page(where=DeadLetterFilter(state="open"), limit=1)) == 1
    letter = store.dead_letters_page(where=every).items[0]
    store.dead_letter_note(id=letter.id, text="rotated the key", by="ops")
    noted = store.dead_letter_note(id=letter.id, text="replaying", by=None)
    assert [(n["by"], n["text"]) for n in noted.notes] == [("ops", "rotated the key"), (None, "replaying")]
    with pytest.raises(DeadLetterNotFound):
        store.dead_letter_note(id=10_000, text="x", by=None)
    assert store.dead_letter_get(id=10_000) is None


def test_a_resolve_closes_open_letters_once_and_frees_their_jobs(timed_store: Store, clock) -> None:
    store = timed_store
    store.jobs_insert(jobs=[new(task="t", max_attempts=1) for _ in range(4)])
    jobs = [claim_one(store) for _ in range(4)]
    for job in jobs:
        fail(store, job, "NOT_PDF")
    letters = [letter_of(store, job.id) for job in jobs]
    assert revive(store, jobs[0].id, "replay", by="ops", dead_letter_id=letters[0].id) is not None
    # Resolving a replayed letter, an open one twice and one that does not exist: the open ones close, once
    closed = store.dead_letters_resolve(ids=[letters[0].id, letters[1].id, letters[1].id, letters[2].id, 10_000],
                                        by="ops", note="refunded by hand")
    assert [d.id for d in closed] == [letters[1].id, letters[2].id]
    assert all(d.state == "resolved" and d.resolved_by == "ops" and d.resolved_at is not None
               and d.replayed_at is None for d in closed)
    assert [(n["by"], n["text"]) for n in closed[0].notes] == [("ops", "refunded by hand")]
    assert store.dead_letters_resolve(ids=[letters[1].id], by="bob") == []  # a second operator changes nothing
    assert store.dead_letter_get(id=letters[1].id).resolved_by == "ops"
    assert store.dead_letter_get(id=letters[0].id).state == "replayed"
    # Without a note, none is added
    (quiet,) = store.dead_letters_resolve(ids=[letters[3].id], by=None)
    assert quiet.notes == [] and quiet.state == "resolved"
    # A resolved letter is not replayed; its job can still be retried by hand, and the letter stays resolved
    assert revive(store, jobs[1].id, "replay", by="ops", dead_letter_id=letters[1].id) is None
    assert revive(store, jobs[2].id, "manual_retry", by="alice") is not None
    assert store.dead_letter_get(id=letters[2].id).state == "resolved"
    # The filters and the counts see three states
    states = {state: [d.id for d in store.dead_letters_page(where=DeadLetterFilter(state=state)).items]
              for state in ("open", "replayed", "resolved")}
    assert states == {"open": [], "replayed": [letters[0].id],
                      "resolved": [letters[3].id, letters[2].id, letters[1].id]}
    assert store.dead_letter_facets(where=DeadLetterFilter(state="open")).total == 0
    assert store.dead_letter_facets(where=DeadLetterFilter(state="resolved")).total == 3
    # A resolved letter no longer holds its failed job back from the prune
    clock.advance(timedelta(days=40))
    assert store.jobs_prune(older_than=timedelta(days=30)) == 2  # jobs[1] and jobs[3]; the others are queued
    assert store.job_get(job_id=jobs[1].id) is None and store.dead_letter_get(id=letters[1].id) is None


def test_a_lease_that_expires_on_the_last_attempt_is_dead_lettered(store: Store) -> None:
    store.jobs_insert(jobs=[new(max_attempts=1, stage="only")])
    job = claim_one(store, ttl=timedelta(milliseconds=300))
    assert wait_for(lambda: reclaim(store), timeout=5) == [job.id]
    letter = letter_of(store, job.id)
    assert (letter.error_class, letter.stage, letter.retryable) == (LEASE_EXPIRED, "only", False)
    assert letter.context == {"worker": "w-test"}


def test_a_plan_made_before_the_job_failed_again_is_refused(store: Store) -> None:
    store.jobs_insert(jobs=[new()])
    fail(store, claim_one(store))
    (job,) = store.jobs_page(where=JobFilter()).items
    stale = revive_plan(job, reason="manual_retry", by="alice")
    # Given someone else retried it meanwhile, and it failed again
    assert revive(store, job.id, "manual_retry", by="bob") is not None
    fail(store, claim_one(store), "NOT_FOUND")
    # Then the plan made from the first failure changes nothing
    assert store.jobs_revive(revivals=[Revival(job.id, stale)]) == [None]
    now = store.job_get(job_id=job.id)
    assert (now.status, now.error_code, now.manual_retry_count) == (Status.FAILED, "NOT_FOUND", 1)


def test_a_batch_revives_each_job_its_plan_still_fits_and_reports_the_rest_as_none(store: Store) -> None:
    store.jobs_insert(jobs=[new(queue="a"), new(queue="b"), new(queue="a")])
    for queue in ("a", "b", "a"):
        fail(store, claim_one(store, queues=[queue]))
    jobs = sorted(store.jobs_page(where=JobFilter()).items, key=lambda j: j.queue == "b")  # a, a, b
    jobs[1:] = jobs[:0:-1]  # a, b, a: the stale plan in the middle
    plans = [revive_plan(job, reason="manual_retry", by="ops") for job in jobs]
    # The middle job is retried by someone else first: its plan is stale
    assert revive(store, jobs[1].id, "manual_retry", by="bob") is not None
    wakes: list[str] = []
    unsubscribe = store.wakeups_subscribe(wakes.append)

    def heard() -> bool:  # a store that pushes wake-ups may start listening in a thread of its own
        if not wakes:
            store.jobs_insert(jobs=[new(queue="warm")])
        return bool(wakes)

    if unsubscribe is not None:
        wait_for(heard, timeout=5)
    revived = store.jobs_revive(revivals=[Revival(job.id, plan) for job, plan in zip(jobs, plans, strict=True)])
    assert [None if r is None else r.id for r in revived] == [jobs[0].id, None, jobs[2].id]
    for job in (jobs[0], jobs[2]):
        now = store.job_get(job_id=job.id)
        assert (now.status, now.attempts, now.manual_retry_count) == (Status.QUEUED, 0, 1)
        last = assert_history(store, job.id)[-1]
        assert (last.from_status, last.to_status) == (Status.FAILED, Status.QUEUED)
        assert last.meta["by"] == "ops" and last.meta["dead_letter_ids"] == [letter_of(store, job.id).id]
        assert letter_of(store, job.id).state == "replayed"
    assert [e.meta["by"] for e in assert_history(store, jobs[1].id) if e.from_status is Status.FAILED] == ["bob"]
    if unsubscribe is not None:  # a store that pushes wake-ups tells the queue of each revived job
        wait_for(lambda: "a" in wakes)
        unsubscribe()
    # A batch that names a job twice is refused whole
    taken = claim_one(store, queues=["a"])
    fail(store, taken)
    again = store.job_get(job_id=taken.id)
    twice = [Revival(again.id, revive_plan(again, reason="manual_retry", by="ops"))] * 2
    with pytest.raises(ConfigError, match="twice"):
        store.jobs_revive(revivals=twice)
    assert store.job_get(job_id=again.id).status is Status.FAILED
    assert store.jobs_revive(revivals=[]) == []


def _counted(store: Store, where: DeadLetterFilter) -> dict:
    """The facets of ``where`` counted one letter at a time, as a reader would."""
    letters, after = [], None
    while True:
        page = store.dead_letters_page(where=where, after=after, limit=100)
        letters += page.items
        if not (after := page.next_cursor):
            break
    classes, tasks = Counter(d.error_class for d in letters), Counter((d.task, d.error_class) for d in letters)
    return {"total": len(letters), "classes": dict(classes), "stages": dict(Counter(d.stage or "" for d in letters)),
            "by_task": dict(tasks)}


def test_the_letter_counts_kept_as_letters_open_and_close_match_the_letters(timed_store: Store,
                                                                                 clock) -> None:
    store = timed_store
    store.jobs_insert(jobs=[new(task=f"t{n % 3}", max_attempts=1) for n in range(12)])
    jobs = [claim_one(store) for _ in range(12)]
    for n, job in enumerate(jobs):
        fail(store, job, "NOT_PDF" if n % 2 else "AUTH_DENIED", stage="fetch" if n % 4 == 0 else None)
    # two replayed (one of which fails again: open anew), one deleted once replayed and done; two resolved
    assert len(store.dead_letters_resolve(ids=[letter_of(store, job.id).id for job in jobs[10:]], by="ops")) == 2
    for job in jobs[:2]:
        assert revive(store, job.id, "replay", by="ops", dead_letter_id=letter_of(store, job.id).id)
    again = claim_one(store)
    fail(store, again, "NOT_PDF")
    done = claim_one(store)
    applied(store.jobs_finish([Completion(done.lease, None)]))
    clock.advance(timedelta(days=40))
    # the job that succeeded on its replay, and the two whose letters were resolved
    assert store.jobs_prune(older_than=timedelta(days=30)) == 3

    totals = {}
    for where in (DeadLetterFilter(state="open"), DeadLetterFilter(state="replayed"),
                  DeadLetterFilter(state="resolved"), DeadLetterFilter()):
        kept = store.dead_letter_facets(where=where)
        totals[where.state] = kept.total
        assert {"total": kept.total, "classes": kept.error_classes, "stages": kept.stages,
                "by_task": kept.by_task} == _counted(store, where)
    # 12 letters, 2 resolved, 2 replayed; one of those failed again (a 13th, open); the other's job was
    # pruned with it. The two resolved ones are pruned too: their jobs are old history nobody holds.
    assert totals == {"open": 9, "replayed": 1, "resolved": 0, None: 10}
    # a narrower filter is counted from the letters themselves, and agrees
    narrow = DeadLetterFilter(state="open", task="t1")
    assert store.dead_letter_facets(where=narrow).total == _counted(store, narrow)["total"]
