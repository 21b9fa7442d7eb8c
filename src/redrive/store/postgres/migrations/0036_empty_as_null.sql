-- A job's empty collections are stored as NULL, which takes no room in a
-- row, where '{}' and '[]' take 5 bytes each: most jobs have no keyword
-- arguments, no stage outputs or stage counts yet, and no dependencies, and
-- each job writes its row three times (enqueue, claim, history), so about
-- 55 bytes of WAL a job (bench/run dbcost, bench/NOTES.md). Readers take
-- NULL as empty: the store's decoders, the claim's breaker filter below,
-- a stage's checkpoint (store/postgres/sql/endings.sql). Arguments stay
-- as they are: a job with none is rare.
ALTER TABLE redrive_job
    ALTER COLUMN kwargs DROP NOT NULL,
    ALTER COLUMN stage_attempts DROP NOT NULL, ALTER COLUMN stage_attempts DROP DEFAULT,
    ALTER COLUMN checkpoint DROP NOT NULL, ALTER COLUMN checkpoint DROP DEFAULT,
    ALTER COLUMN dependencies DROP NOT NULL, ALTER COLUMN dependencies DROP DEFAULT;
ALTER TABLE redrive_job_done
    ALTER COLUMN kwargs DROP NOT NULL,
    ALTER COLUMN stage_attempts DROP NOT NULL, ALTER COLUMN stage_attempts DROP DEFAULT,
    ALTER COLUMN checkpoint DROP NOT NULL, ALTER COLUMN checkpoint DROP DEFAULT,
    ALTER COLUMN dependencies DROP NOT NULL, ALTER COLUMN dependencies DROP DEFAULT;
-- a failure with no stage counts leaves its dead letter's NULL too
ALTER TABLE redrive_dead_letter ALTER COLUMN stage_attempts DROP NOT NULL;

-- The claim's pick (migration 0026), with a job of no dependencies (NULL)
-- passing a breaker's filter: NULL ?| blocked is NULL, not false.
CREATE OR REPLACE FUNCTION redrive_due(queues text[], batch integer, blocked text[], at timestamptz)
RETURNS TABLE (id uuid, from_status text)
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET enable_sort = off
SET plan_cache_mode = force_generic_plan
ROWS 1
AS $$
BEGIN
    RETURN QUERY
    SELECT j.id, j.status
    FROM redrive_job AS j
    WHERE j.status IN ('scheduled', 'queued') AND j.run_at <= at AND j.queue = ANY(queues)
      AND (blocked IS NULL OR j.dependencies IS NULL OR NOT j.dependencies ?| blocked)
    ORDER BY j.priority, j.run_at
    LIMIT batch
    FOR UPDATE SKIP LOCKED;
END
$$;
