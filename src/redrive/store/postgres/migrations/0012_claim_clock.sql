-- The claim compares due times with the clock it is given: the database's
-- now() in production, a test's stubbed clock in the behaviour suite (a
-- store opened with clock=...). Same body and plan pins as before.
DROP FUNCTION redrive_due(text[], integer, text[]);
CREATE FUNCTION redrive_due(queues text[], batch integer, blocked text[], at timestamptz)
RETURNS TABLE (id uuid, from_status text)
LANGUAGE sql
SET enable_bitmapscan = off
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
