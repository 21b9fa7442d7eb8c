-- Less work for the database in each claim and each ending (bench/NOTES.md,
-- 2026-12-06, seventh session): the pick says where each row it locked is,
-- and a batch's successes are read from their lists in place.

-- The successes of a batch read as rows by subscript: unnest over five
-- arrays wrote each of them to a store of its own before it joined them
-- (five stored rows a job); one series of positions reads the five arrays
-- in place, each list parsed once. The same arguments and answers as
-- migration 0041's.
CREATE OR REPLACE FUNCTION redrive_successes(ids uuid[], tokens uuid[], ns text, dur_ms text, wait_ms text)
RETURNS TABLE (id uuid, token uuid, n int, dur_ms int, wait_ms int, o int)
LANGUAGE sql IMMUTABLE STRICT ROWS 1
AS $$
    SELECT ids[i], tokens[i], a.ns[i], a.dur_ms[i], a.wait_ms[i], i
    FROM (SELECT string_to_array(ns, ',')::int[] AS ns, string_to_array(dur_ms, ',', '')::int[] AS dur_ms,
                 string_to_array(wait_ms, ',', '')::int[] AS wait_ms
          OFFSET 0) AS a  -- each list parsed once, not at each row it is read
    CROSS JOIN generate_series(1, cardinality(ids)) AS i
$$;

-- The claim's pick (migration 0036's redrive_due, kept below for the workers of
-- the previous release) answering where each row it locked is, so that the
-- claim updates it there (a TID scan) instead of looking each job up again
-- in the primary key: the rows stay locked, so they stay where they are.
CREATE FUNCTION redrive_pick(queues text[], batch integer, blocked text[], at timestamptz)
RETURNS TABLE (id uuid, from_status text, place tid)
LANGUAGE plpgsql
SET enable_bitmapscan = off
SET enable_sort = off
SET plan_cache_mode = force_generic_plan
ROWS 1
AS $$
BEGIN
    RETURN QUERY
    SELECT j.id, j.status, j.ctid
    FROM redrive_job AS j
    WHERE j.status IN ('scheduled', 'queued') AND j.run_at <= at AND j.queue = ANY(queues)
      AND (blocked IS NULL OR j.dependencies IS NULL OR NOT j.dependencies ?| blocked)
    ORDER BY j.priority, j.run_at
    LIMIT batch
    FOR UPDATE SKIP LOCKED;
END
$$;

-- redrive_due, for those workers, now reads redrive_pick: one pick to keep.
CREATE OR REPLACE FUNCTION redrive_due(queues text[], batch integer, blocked text[], at timestamptz)
RETURNS TABLE (id uuid, from_status text)
LANGUAGE sql ROWS 1
AS $$
    SELECT p.id, p.from_status FROM redrive_pick(queues, batch, blocked, at) AS p
$$;
