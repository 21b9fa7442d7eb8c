"""The read side on every store: pages that say whether more exist, filters,
queue counts from active jobs only, dead-letter facets, outbox and schedules."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from redrive.core.job import DeadLetterFilter, JobKey, NewJob
from redrive.core.outbox import OutboxChange, OutboxStatus
from redrive.core.states import Status
from redrive.core.transitions import Completion, FailNow, RetryLater
from redrive.errors import ConfigError
from redrive.store.reads import MAX_PAGE, JobFilter, Reads
from redrive.testing import applied, claim, claim_one, new


def _walk(read, **options) -> list[list]:
    """Every page of a list, following the cursors."""
    pages, after = [], None
    while True:
        page = read(after=after, **options)
        pages.append(list(page))
        if not page.more:
            assert page.next_cursor is None
            return pages
        after = page.next_cursor


def test_job_pages_cover_every_job_once_newest_first_across_both_tables(store: Reads) -> None:
    # Given jobs created in one statement (the same creation time on PostgreSQL)
    # and in later ones, some of them finished
    first = [r.job for r in store.jobs_insert(jobs=[new(args=[n]) for n in range(5)])]
    later = [store.jobs_insert(jobs=[new(args=[n])])[0].job for n in range(5, 8)]
    for job in claim(store, 3):
        applied(store.jobs_finish([Completion(job.lease, None)]))
    # When they are read three at a time
    pages = _walk(lambda **o: store.jobs_page(where=JobFilter(), **o), limit=3)
    # Then every job comes once, in (created_at, id) order from the newest
    assert [len(p) for p in pages] == [3, 3, 2]
    seen = [j for p in pages for j in p]
    assert sorted(j.id for j in seen) == sorted(j.id for j in first + later)
    keys = [(j.created_at, str(j.id)) for j in seen]
    assert keys == sorted(keys, reverse=True)
    assert {j.status for j in seen} == {Status.QUEUED, Status.SUCCEEDED}


def test_job_filters(store: Reads) -> None:
    keyed = NewJob(id=uuid.uuid4(), task="mail", queue="email", args=[], kwargs={}, priority=0,
                   max_attempts=3, owner="ann", key=JobKey("welcome:ann", 1, "fp"))
    store.jobs_insert(jobs=[keyed, new(task="mail", queue="email"), new(task="other")])
    job = claim_one(store, queues=["email"])  # one of the two email jobs
    applied(store.jobs_finish([RetryLater(job.lease, timedelta(hours=1), "UPSTREAM_5XX", "503")]))

    def ids(**where) -> set:
        return {j.id for j in store.jobs_page(where=JobFilter(**where), limit=10)}

    assert ids(owner="ann") == {keyed.id}
    assert ids(idempotency_key="welcome:ann") == {keyed.id}
    assert ids(error_code="UPSTREAM_5XX") == {job.id}  # the last error of a job waiting to retry
    assert len(ids(task="mail", queue="email")) == 2 and len(ids(task="other")) == 1
    assert ids(statuses=(Status.RUNNING,)) == set()
    now = store.now()
    assert len(ids(created_before=now + timedelta(seconds=1))) == 3
    assert ids(created_after=now + timedelta(seconds=1)) == set()


def test_a_cursor_is_checked_and_a_page_size_is_clamped(store: Reads) -> None:
    store.jobs_insert(jobs=[new()])
    for bad in ("nonsense", "W10", "WyJ4Il0"):  # not base64 JSON; an empty key; a key of one item
        with pytest.raises(ConfigError, match="cursor"):
            store.jobs_page(where=JobFilter(), after=bad)
    with pytest.raises(ConfigError, match="positive integer"):
        store.jobs_page(where=JobFilter(), limit=0)
    page = store.jobs_page(where=JobFilter(), limit=MAX_PAGE * 10)
    assert len(page) == 1 and not page.more


def test_queue_stats_count_active_jobs_and_the_oldest_due_wait(store: Reads) -> None:
    now = store.now()
    store.jobs_insert(jobs=[new(queue="a", run_at=now - timedelta(seconds=30)), new(queue="a"),
                            new(queue="a", delay=timedelta(hours=1)), new(queue="b")])
    running = claim_one(store, queues=["b"])
    done = store.jobs_insert(jobs=[new(queue="c")])[0].job
    applied(store.jobs_finish([Completion(claim_one(store, queues=["c"]).lease, None)]))
    stats = {s.queue: s for s in store.queues_stats()}
    assert set(stats) == {"a", "b"}  # finished history is not counted: c has nothing active
    assert stats["a"].counts == {Status.SCHEDULED: 1, Status.QUEUED: 2, Status.RUNNING: 0}
    assert 29 <= stats["a"].oldest_due_age_s < 60
    assert stats["b"].counts[Status.RUNNING] == 1 and stats["b"].oldest_due_age_s is None
    assert 0 <= stats["b"].oldest_running_age_s < 60 and stats["a"].oldest_running_age_s is None
    assert running.queue == "b" and done.queue == "c"


def test_dead_letter_pages_and_facets(store: Reads) -> None:
    store.jobs_insert(jobs=[new(task=f"t{n}") for n in range(5)])
    for n, job in enumerate(claim(store, 5)):
        applied(store.jobs_finish([FailNow(job.lease, "AUTH_DENIED" if n % 2 else "NOT_FOUND", "no",
                                       stage="fetch" if n < 3 else "llm")]))
    pages = _walk(lambda **o: store.dead_letters_page(where=DeadLetterFilter(), **o), limit=2)
    assert [len(p) for p in pages] == [2, 2, 1]
    letter_ids = [d.id for p in pages for d in p]
    assert letter_ids == sorted(letter_ids, reverse=True) and len(set(letter_ids)) == 5
    facets = store.dead_letter_facets(where=DeadLetterFilter())
    assert facets.total == 5
    assert facets.error_classes == {"NOT_FOUND": 3, "AUTH_DENIED": 2}
    assert facets.stages == {"fetch": 3, "llm": 2}
    # by task and error class: each task's one letter, adding up to the classes' counts
    assert sorted(task for task, _ in facets.by_task) == [f"t{n}" for n in range(5)]
    assert set(facets.by_task.values()) == {1}
    assert {c: sum(1 for _, k in facets.by_task if k == c) for c in facets.error_classes} == facets.error_classes
    assert store.dead_letter_facets(where=DeadLetterFilter(stage="llm")).error_classes == {
        "NOT_FOUND": 1, "AUTH_DENIED": 1}
    one = pages[0][0]
    assert [d.id for d in store.dead_letters_page(where=DeadLetterFilter(job_id=one.job_id))] == [one.id]
    assert store.dead_letter_facets(where=DeadLetterFilter(job_id=one.job_id)).total == 1


def test_outbox_pages_oldest_first(store: Reads) -> None:
    store.jobs_insert(jobs=[new()])
    job = claim_one(store)
    for n in range(5):
        assert store.outbox_open(lease=job.lease, key=f'["cl-1","r{n}",1]', token=f"t{n}") is not None
    store.outbox_update(lease=job.lease, key='["cl-1","r0",1]',
                        change=OutboxChange(OutboxStatus.FAILED, error_code="INVALID_RECIPIENT"))
    pages = _walk(lambda **o: store.outbox_page(**o), limit=2)
    assert [len(p) for p in pages] == [2, 2, 1]
    rows = [r for p in pages for r in p]
    assert sorted(r.key for r in rows) == sorted(f'["cl-1","r{n}",1]' for n in range(5))
    assert [(r.created_at, r.key) for r in rows] == sorted((r.created_at, r.key) for r in rows)
    (failed,) = store.outbox_page(status=OutboxStatus.FAILED)
    assert failed.error_code == "INVALID_RECIPIENT"
    assert len(store.outbox_page(job_id=job.id, limit=10)) == 5


def test_schedules_list_their_checkpoints(store: Reads) -> None:
    now = store.now()
    store.schedule_checkpoint(name="offers", now=now)
    store.schedule_advance(name="offers", to=now + timedelta(minutes=1))
    store.schedule_checkpoint(name="digest", now=now)
    states = store.schedules_list()
    assert [s.name for s in states] == ["digest", "offers"]
    assert states[1].fired_until == now + timedelta(minutes=1) and states[0].fired_until == now


def test_the_audit_trail_keeps_who_did_what_to_a_job(store: Reads) -> None:
    job = store.jobs_insert(jobs=[new()])[0].job
    first = store.audit_record(by="ops:ann", action="reveal", job_id=job.id, detail={"fields": ["args"]})
    store.audit_record(by="ops:bob", action="reveal", job_id=job.id)
    store.audit_record(by="ops:bob", action="reveal", job_id=uuid.uuid4())  # another job's
    trail = store.audits_list(job_id=job.id)
    assert [(e.by, e.action, e.job_id) for e in trail] == [("ops:ann", "reveal", job.id), ("ops:bob", "reveal", job.id)]
    assert trail[0] == first and first.detail == {"fields": ["args"]} and first.at <= store.now()
    assert trail[0].id < trail[1].id


def test_actions_on_no_one_job_have_a_trail_of_their_own(store: Reads) -> None:
    job = store.jobs_insert(jobs=[new()])[0].job
    store.audit_record(by="ops:ann", action="reveal", job_id=job.id)
    paused = store.audit_record(by="ops:ann", action="pause_queue", detail={"queue": "email"})
    bulk = store.audit_record(by="ops:bob", action="bulk_retry", detail={"filter": {"task": "t"}, "count": 3})
    trail = store.audits_list(job_id=None)
    assert trail == [paused, bulk]
    assert trail[1].detail == {"filter": {"task": "t"}, "count": 3} and trail[1].job_id is None


def test_a_dashboard_session_lasts_its_time_and_ends_when_closed(store: Reads) -> None:
    store.session_open(id="s1", principal="p1", ttl=timedelta(hours=12))
    store.session_open(id="s2", principal="p2", ttl=timedelta(hours=12))
    store.session_open(id="gone", principal="p3", ttl=timedelta(seconds=-1))  # past its time at once
    assert (store.session_read(id="s1"), store.session_read(id="s2")) == ("p1", "p2")
    assert store.session_read(id="gone") is None and store.session_read(id="never") is None
    store.session_close(id="s1")
    assert (store.session_read(id="s1"), store.session_read(id="s2")) == (None, "p2")
    store.session_close(id="s1")  # twice: nothing to do


def test_a_schedule_is_paused_and_resumed_once_each(store: Reads) -> None:
    now = store.now()
    assert store.schedule_pause(name="fresh", by="ops:ann", now=now)  # never fired yet: made paused
    assert not store.schedule_pause(name="fresh", by="ops:bob", now=now)
    store.schedule_checkpoint(name="firing", now=now)
    states = {s.name: s for s in store.schedules_list()}
    assert (states["fresh"].paused_by, states["firing"].paused_by) == ("ops:ann", None)
    assert states["fresh"].fired_until == now
    assert store.schedule_resume(name="fresh") and not store.schedule_resume(name="fresh")
    assert not store.schedule_resume(name="firing") and not store.schedule_resume(name="never")
    assert {s.name: s.paused_by for s in store.schedules_list()} == {"fresh": None, "firing": None}
