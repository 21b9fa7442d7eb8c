-- The job list reads the waiting and running jobs newest first too. The hot
-- table was left without this index as small; during an outage it holds the
-- backlog (100,000 queued: the first page scanned and sorted all of them,
-- about 70 ms here; with it, 3-5 ms). Every enqueue and claim pays one more
-- index entry, at the index's right edge (docs/performance.md).
CREATE INDEX redrive_job_created ON redrive_job (created_at, id);
