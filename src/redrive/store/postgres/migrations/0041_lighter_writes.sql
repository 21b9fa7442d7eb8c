-- Cuts in the server's work a job (bench/NOTES.md, counted in instructions
-- with callgrind, so that each was measured alone), and the function that
-- reads what follows a batch's endings:
--
-- A batch written by COPY (Enqueue._insert_copied) leaves out its creation
-- and due times, which are the transaction's clock: taken from these
-- defaults, not parsed from text twice a row (a tenth of the COPY's work).
ALTER TABLE redrive_job
    ALTER COLUMN created_at SET DEFAULT now(),
    ALTER COLUMN run_at SET DEFAULT now();

-- The claim is not a HOT update (it changes the status, which the partial
-- indexes read), so each claimed job adds a second entry with its id to the
-- primary key. Enqueues fill that index from the right, page after page
-- (ids are UUIDv7, in time order); half-full pages keep room for those
-- second entries, where full ones made each claim try to free room first
-- (a bottom-up deletion that finds nothing: the first versions are still
-- visible) and then split. Pages made from now on; a REINDEX makes all.
ALTER INDEX redrive_job_pkey SET (fillfactor = 50);

-- A batch of successes, as migration 0040's redrive_successes reads it, but
-- its ids and lease tokens as arrays in binary (sixteen bytes each, not text
-- to parse) and without the rollup's buckets: the worker counts what a batch
-- wrote (core/rollups.py's rollup_tally, as the other stores do) and
-- jobs_ended adds it in the same transaction. Migration 0040's stays for
-- workers of the release before during an upgrade.
CREATE FUNCTION redrive_successes(ids uuid[], tokens uuid[], ns text, dur_ms text, wait_ms text)
RETURNS TABLE (id uuid, token uuid, n int, dur_ms int, wait_ms int, o int)
LANGUAGE sql IMMUTABLE STRICT ROWS 1
AS $$
    SELECT u.id, u.token, u.n, u.dur_ms, u.wait_ms, u.o::int
    FROM unnest(ids, tokens, string_to_array(ns, ',')::int[], string_to_array(dur_ms, ',', '')::int[],
                string_to_array(wait_ms, ',', '')::int[])
         WITH ORDINALITY AS u(id, token, n, dur_ms, wait_ms, o)
$$;

-- What jobs_ended reads as rows: the jobs a batch ended, each with its status,
-- as their ids (an array, in binary) and their statuses. Planned as one row,
-- for the reason migration 0040 gives: a plan made while the workflow steps
-- were few must still look each job's step up by its index.
CREATE FUNCTION redrive_ended(ids uuid[], statuses text[])
RETURNS TABLE (id uuid, status text)
LANGUAGE sql IMMUTABLE STRICT ROWS 1
AS $$
    SELECT u.id, u.status FROM unnest(ids, statuses) AS u(id, status)
$$;
