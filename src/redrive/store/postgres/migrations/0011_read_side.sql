-- The job list reads history newest first, a page at a time (store/reads.py).
-- The hot table has no such index: it is small, and every enqueue would pay for it.
CREATE INDEX redrive_job_done_created ON redrive_job_done (created_at, id);
