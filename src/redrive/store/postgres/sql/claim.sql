-- The claim (due jobs by priority, skipping open breakers' and, with
-- limits, past their permits), and the leases it hands out.

-- name: _implied_start
-- The first start of a job whose enqueue is implied is implied too
-- (migration 0032): its id now, the rest read from the row.
implied_started = CASE WHEN j.started_at IS NULL AND j.implied_enqueued IS NOT NULL
                       THEN nextval('redrive_job_event_id_seq') ELSE j.implied_started END

-- name: _start_events
-- A claim's events, less the starts it implied: those are the only ones
-- whose start is this statement's (a job started before has an earlier one).
INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
SELECT id, now(), from_status, 'running', attempts, jsonb_build_object('worker', %(worker_id)s::text)
FROM claimed
WHERE implied_started IS NULL OR started_at < now()

-- name: _lease_token
-- A claim's lease tokens share a random prefix, drawn once for the claim
-- (74 random bits), and end in each job's place in it (picked.n): each is
-- unique to one claim of one job, which is what fencing asks of it. A
-- random UUID a job was OpenSSL's generator each time: twice the work.
lease_token = ((SELECT left(gen_random_uuid()::text, 24)) || lpad(to_hex(picked.n), 12, '0'))::uuid

-- name: jobs_claim
-- redrive_pick (migrations 0007, 0026, 0042) picks and locks the batch with a
-- pinned plan, and says where each row is: the update finds it there (a TID
-- scan), not through the primary key again; locked, the rows cannot move.
-- created_at is set to itself so that PostgreSQL counts it as changed: the
-- running index's key is otherwise unchanged by a claim, and for such an
-- entry PostgreSQL tries a bottom-up deletion whenever its leaf page is full
-- (a COPY batch's jobs share one created_at, so the page is all duplicates):
-- a visit to their heap pages that cost a tenth of a job's work in the
-- database (bench/NOTES.md). Its dead entries go with the next vacuum, or
-- with the scan that finds them dead, as any index's do.
WITH claimed AS (
    UPDATE redrive_job AS j
    SET status = 'running',
        attempts = j.attempts + 1,
        {_lease_token},
        lease_owner = %(worker_id)s,
        lease_expires_at = now() + %(lease_ttl)s,
        started_at = coalesce(j.started_at, now()),
        {_implied_start},
        updated_at = now(),
        created_at = j.created_at
    FROM redrive_pick(%(queues)s, %(limit)s, %(blocked)s::text[], now())
        WITH ORDINALITY AS picked(id, from_status, place, n)
    WHERE j.ctid = picked.place AND j.id = picked.id
    -- what the worker reads and the start events need, not the whole row: the
    -- rows are kept for both readers, and a narrower one costs less to keep
    -- (a fortieth of the claim, bench/NOTES.md). The JSON columns travel
    -- as one value (one decode per job instead of five); what a running job
    -- cannot have (a result, an error, an end) stays behind.
    RETURNING j.id, j.task, j.queue, j.priority, j.run_at, j.attempts, j.max_attempts, j.owner, j.lease_token,
        j.lease_owner, j.lease_expires_at, j.last_error_code, j.last_error_message, j.created_at, j.updated_at,
        j.started_at, j.stage, j.manual_retry_count, j.first_failed_at, j.idempotency_key, j.version,
        j.implied_started, picked.from_status,
        j.args, j.kwargs, j.stage_attempts, j.checkpoint, j.dependencies, j.ctid AS place
), events AS (
    {_start_events}
)
-- _claimed reads these by position. They come in the pick's order (the
-- update goes through it row by row), which the store sorts in one pass.
SELECT id, task, queue, priority, run_at, attempts, max_attempts, owner, lease_token, lease_owner,
       lease_expires_at, last_error_code, last_error_message, created_at, updated_at, started_at,
       stage, manual_retry_count, first_failed_at, idempotency_key, version,
       args, kwargs, stage_attempts, checkpoint, dependencies, place
FROM claimed;

-- name: jobs_due_limited
-- A claim with limits reads its candidates without locking them: it locks
-- nothing while the worker decides (core/limits.py); jobs_claim_chosen takes
-- only those still waiting.
SELECT id::text AS id, queue, owner, dependencies FROM redrive_job
WHERE queue = ANY(%(queues)s) AND status IN ('scheduled', 'queued') AND run_at <= now()
  AND (%(blocked)s::text[] IS NULL OR dependencies IS NULL OR NOT dependencies ?| %(blocked)s::text[])
ORDER BY priority, run_at
LIMIT %(limit)s;

-- name: permits_read
-- The permits of a claim's keys, each with its seq (migration 0033), its age
-- and whether its job still runs. Those past every window this claim's rules keep
-- whose jobs no longer run are forgotten here too (read once more by this
-- statement, they count for nothing). Ages are read with clock_timestamp(),
-- as permits are stamped: a start stamped early leaves its window early.
WITH forgotten AS (
    DELETE FROM redrive_permit AS p
    WHERE p.key = ANY(%(keys)s) AND p.at < now() - %(keep)s
      AND NOT EXISTS (SELECT 1 FROM redrive_job AS j WHERE j.id = p.job_id AND j.lease_token = p.lease_token)
)
SELECT p.key, extract(epoch FROM clock_timestamp() - p.at)::float8 AS age_s, j.id IS NOT NULL AS running, p.seq
FROM redrive_permit AS p
LEFT JOIN redrive_job AS j ON j.id = p.job_id AND j.lease_token = p.lease_token
WHERE p.key = ANY(%(keys)s);

-- name: jobs_claim_chosen
-- jobs_claim for a claim with limits (same columns, same events): under the
-- limits' lock, redrive_limits_pick (migration 0033) answers in order the
-- candidates (:ids) that fit the :rooms the worker read, less the starts
-- made since its read (:seen), twice as many as wanted; this claims the
-- first :limit of them still waiting, skipping any another claim holds, with
-- their permits (one for each of a job's keys: :set_of, :sets, :keys). The
-- lists come as text: psycopg writes a long list a few times slower.
WITH input AS (
    SELECT string_to_array(%(ids)s, ',')::uuid[] AS ids, string_to_array(%(set_of)s, ',')::integer[] AS set_of
), chosen AS (
    SELECT redrive_limits_pick(ids, set_of, %(sets)s::integer[], %(keys)s::text[],
                               %(rooms)s::integer[], %(seen)s, 2 * %(limit)s) AS ids
    FROM input
), picked AS (
    -- in the pick's order (a nested loop over it), locking only the rows it takes
    SELECT j.id, j.status AS from_status, u.n
    FROM unnest((SELECT ids FROM chosen)) WITH ORDINALITY AS u(id, n)
    CROSS JOIN LATERAL (SELECT j.id, j.status FROM redrive_job AS j
                        WHERE j.id = u.id AND j.status IN ('scheduled', 'queued')
                        FOR UPDATE SKIP LOCKED) AS j
    LIMIT %(limit)s
), claimed AS (
    UPDATE redrive_job AS j
    SET status = 'running',
        attempts = j.attempts + 1,
        {_lease_token},
        lease_owner = %(worker_id)s,
        lease_expires_at = now() + %(lease_ttl)s,
        started_at = coalesce(j.started_at, clock_timestamp()),  -- as its permits
        {_implied_start},
        updated_at = now(),
        created_at = j.created_at  -- as jobs_claim's, for its running index
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.*, j.ctid AS place, picked.from_status
), events AS (
    {_start_events}
), permits AS (
    INSERT INTO redrive_permit (key, job_id, lease_token, at)
    SELECT k.key, c.id, c.lease_token, clock_timestamp()
    FROM claimed AS c
    JOIN (SELECT u.id, u.shape FROM input, unnest(input.ids, input.set_of) AS u(id, shape)) AS u ON u.id = c.id
    CROSS JOIN LATERAL unnest((%(sets)s::integer[])[u.shape:u.shape][1:]) AS s(place)
    CROSS JOIN LATERAL (SELECT (%(keys)s::text[])[s.place] AS key) AS k
    WHERE s.place > 0
)
SELECT id, task, queue, priority, run_at, attempts, max_attempts, owner, lease_token, lease_owner,
       lease_expires_at, last_error_code, last_error_message, created_at, updated_at, started_at,
       stage, manual_retry_count, first_failed_at, idempotency_key, version,
       args, kwargs, stage_attempts, checkpoint, dependencies, place
FROM claimed ORDER BY priority, run_at;

-- name: lease_lock
SELECT 1 AS held FROM redrive_job WHERE id = %(id)s AND lease_token = %(token)s AND lease_expires_at > now() FOR SHARE;

-- name: leases_extend
UPDATE redrive_job AS j
SET lease_expires_at = now() + %(lease_ttl)s
FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS l(id, token)
WHERE j.id = l.id AND j.lease_token = l.token AND j.lease_expires_at > now()
RETURNING j.id, j.lease_token, j.ctid;  -- where the row now is (places.py)
