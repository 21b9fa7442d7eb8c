-- The claim walks the due index in (priority, run_at) order and stops after
-- its batch. Right after a burst of enqueues the planner's statistics can say
-- the table is nearly empty; it then prefers a bitmap scan that sorts every
-- due job (a million jobs: 300 ms and 50 MB of disk per claim). The function
-- pins the plan, whatever the statistics say (docs/performance.md).
CREATE FUNCTION redrive_due(queues text[], batch integer, blocked text[])
RETURNS TABLE (id uuid, from_status text)
LANGUAGE sql
SET enable_bitmapscan = off
AS $$
    SELECT j.id, j.status
    FROM redrive_job AS j
    WHERE j.status IN ('scheduled', 'queued') AND j.run_at <= now() AND j.queue = ANY(queues)
      AND (blocked IS NULL OR NOT j.dependencies ?| blocked)
    ORDER BY j.priority, j.run_at
    LIMIT batch
    FOR UPDATE SKIP LOCKED
$$;

-- A queue table turns over all the time: vacuum and analyze it long before
-- the defaults (20 % and 10 % of the table) would.
ALTER TABLE redrive_job SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02
);
