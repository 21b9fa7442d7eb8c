-- Waiting jobs by queue and state, oldest due first: the queue counts read
-- each queue's first entry (its oldest due job) and count at most a cap of
-- entries, never every waiting job (queues_stats). Running rows are not in
-- it, so a claim writes no entry; an enqueue or a retry writes one.
CREATE INDEX redrive_job_waiting ON redrive_job (queue, status, run_at)
    WHERE status IN ('scheduled', 'queued');
-- Beyond the cap the planner estimates a queue's count: let it know how
-- queues and states go together.
CREATE STATISTICS redrive_job_queue_status (mcv) ON queue, status FROM redrive_job;
-- The claim must keep walking the due jobs' index in its order: this index
-- also matches the claim's filter, and reading a queue's every due job from
-- it and sorting them cost a third of the claim's throughput (measured:
-- bench.backlog --index-cost). Pinned as bitmaps are (migration 0012).
CREATE OR REPLACE FUNCTION redrive_due(queues text[], batch integer, blocked text[], at timestamptz)
RETURNS TABLE (id uuid, from_status text)
LANGUAGE sql
SET enable_bitmapscan = off
SET enable_sort = off
ROWS 10
AS $$
    SELECT j.id, j.status
    FROM redrive_job AS j
    WHERE j.status IN ('scheduled', 'queued') AND j.run_at <= at AND j.queue = ANY(queues)
      AND (blocked IS NULL OR NOT j.dependencies ?| blocked)
    ORDER BY j.priority, j.run_at
    LIMIT batch
    FOR UPDATE SKIP LOCKED
$$;
