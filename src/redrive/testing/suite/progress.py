"""Progress: a running job's latest, kept fenced on its lease, read back as
written, kept after it ends, and gone when the job is pruned."""

from __future__ import annotations

import uuid
from datetime import timedelta

from redrive.core.job import Lease
from redrive.core.progress import progress
from redrive.core.transitions import Completion
from redrive.store.operations import FullStore
from redrive.testing import Clock, applied, claim_one, new


def test_the_latest_progress_is_kept_only_while_the_lease_holds(store: FullStore) -> None:
    made = store.jobs_insert(jobs=[new(task="long"), new(task="other")])
    ids = [r.job.id for r in made]
    job = claim_one(store)
    assert store.progress_read(job_ids=ids) == {}
    assert store.progress_save(lease=job.lease, progress=progress(done=10, total=400, note="page 10"))
    assert store.progress_save(lease=job.lease, progress=progress(0.5, note="half way"))
    (kept,) = store.progress_read(job_ids=ids).values()
    assert (kept.fraction, kept.done, kept.note, kept.share) == (0.5, None, "half way", 0.5) and kept.at is not None
    # a lease that is not the job's writes nothing: a late worker's progress is dropped
    assert not store.progress_save(lease=Lease(job.id, uuid.uuid4()), progress=progress(0.9))
    assert store.progress_read(job_ids=[job.id])[job.id].fraction == 0.5
    assert applied(store.jobs_finish([Completion(job.lease, None)])) == {job.lease}
    assert not store.progress_save(lease=job.lease, progress=progress(1.0)), "an ended job takes no progress"
    assert store.progress_read(job_ids=[job.id])[job.id].note == "half way"  # kept after it ended


def test_progress_goes_with_its_job_when_pruned(timed_store: FullStore, clock: Clock) -> None:
    store = timed_store
    store.jobs_insert(jobs=[new(task="long")])
    job = claim_one(store)
    store.progress_save(lease=job.lease, progress=progress(done=3, total=3))
    assert store.progress_read(job_ids=[job.id])[job.id].share == 1.0
    applied(store.jobs_finish([Completion(job.lease, None)]))
    clock.advance(timedelta(days=40))
    assert store.jobs_prune(older_than=timedelta(days=30)) == 1
    assert store.progress_read(job_ids=[job.id]) == {}
