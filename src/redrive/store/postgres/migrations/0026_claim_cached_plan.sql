-- The claim's pick, planned once per connection instead of once per claim.
-- A SQL function with SET clauses is never inlined, and PostgreSQL parses and
-- plans its body on every call: a fifth of the database's CPU for a claim of
-- one job (perf, a worker claiming as each slot frees). PL/pgSQL keeps the
-- plan for the connection; the plan is the generic one, forced, because with
-- fresh statistics the plan cache judged a custom plan cheaper and planned
-- every call again. The generic plan walks the due index like the pinned one
-- did: sorts and bitmaps stay off (migrations 0007, 0012, 0023).
-- ROWS 1: the claim looks each picked job up by its primary key even on a
-- table of a few hundred jobs, where 10 made a hash join over a scan of the
-- whole table look cheaper (migration 0008).
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
      AND (blocked IS NULL OR NOT j.dependencies ?| blocked)
    ORDER BY j.priority, j.run_at
    LIMIT batch
    FOR UPDATE SKIP LOCKED;
END
$$;
