-- The claim (due jobs by priority, skipping open breakers' and, with
-- limits, past their permits), and the leases it hands out.

-- name: jobs_claim
-- redrive_due (migrations 0007, 0012, 0026) picks and locks the batch with a pinned plan.
WITH picked AS (
    SELECT * FROM redrive_due(%(queues)s, %(limit)s, %(blocked)s::text[], now())
), claimed AS (
    UPDATE redrive_job AS j
    SET status = 'running',
        attempts = j.attempts + 1,
        lease_token = gen_random_uuid(),
        lease_owner = %(worker_id)s,
        lease_expires_at = now() + %(lease_ttl)s,
        started_at = coalesce(j.started_at, now()),
        -- the first start of a job whose enqueue is implied is implied too
        -- (migration 0032): its id now, the rest read from the row
        implied_started = CASE WHEN j.started_at IS NULL AND j.implied_enqueued IS NOT NULL
                               THEN nextval('redrive_job_event_id_seq') ELSE j.implied_started END,
        updated_at = now()
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.*, picked.from_status
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), from_status, 'running', attempts,
           jsonb_build_object('worker', %(worker_id)s::text)
    FROM claimed
    -- a start this statement implied is the only one stamped with its clock
    WHERE implied_started IS NULL OR started_at <> now()
)
-- _claimed reads these by position. The JSON columns travel as one value (one
-- decode per job instead of five); what a running job cannot have (a result,
-- an error, an end) stays behind.
SELECT id, task, queue, priority, run_at, attempts, max_attempts, owner, lease_token, lease_owner,
       lease_expires_at, last_error_code, last_error_message, created_at, updated_at, started_at,
       stage, manual_retry_count, first_failed_at, idempotency_key, version,
       jsonb_build_array(args, kwargs, stage_attempts, checkpoint, dependencies) AS payload
FROM claimed ORDER BY priority, run_at;

-- name: limits_lock
-- Every claim with limits takes this one lock for its transaction: two
-- workers must not both see the same room under a limit.
SELECT pg_advisory_xact_lock(hashtext('redrive:limits'));

-- name: jobs_due_limited
SELECT id::text AS id, queue, owner, dependencies FROM redrive_job
WHERE queue = ANY(%(queues)s) AND status IN ('scheduled', 'queued') AND run_at <= now()
  AND (%(blocked)s::text[] IS NULL OR NOT dependencies ?| %(blocked)s::text[])
ORDER BY priority, run_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: permits_forget
-- Only the keys this claim reads, whose rules it holds: another queue's
-- window may be longer than any of this claim's rules keep.
DELETE FROM redrive_permit AS p
WHERE p.key = ANY(%(keys)s) AND p.at < now() - %(keep)s
  AND NOT EXISTS (SELECT 1 FROM redrive_job AS j WHERE j.id = p.job_id AND j.lease_token = p.lease_token);

-- name: permits_read
-- clock_timestamp(), here and where permits are written: now() is when the
-- transaction began, before it waited for the limits' lock, and a start
-- stamped that early leaves its window early (a burst at the window's edge).
SELECT p.key, extract(epoch FROM clock_timestamp() - p.at)::float8 AS age_s, j.id IS NOT NULL AS running
FROM redrive_permit AS p
LEFT JOIN redrive_job AS j ON j.id = p.job_id AND j.lease_token = p.lease_token
WHERE p.key = ANY(%(keys)s);

-- name: jobs_claim_chosen
-- jobs_claim for the jobs a claim with limits picked (same columns, same events).
WITH picked AS (
    SELECT j.id, j.status AS from_status FROM redrive_job AS j WHERE j.id = ANY(%(ids)s::uuid[])
), claimed AS (
    UPDATE redrive_job AS j
    SET status = 'running',
        attempts = j.attempts + 1,
        lease_token = gen_random_uuid(),
        lease_owner = %(worker_id)s,
        lease_expires_at = now() + %(lease_ttl)s,
        started_at = coalesce(j.started_at, clock_timestamp()),  -- as its permits
        updated_at = now()
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.*, picked.from_status
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), from_status, 'running', attempts, jsonb_build_object('worker', %(worker_id)s::text)
    FROM claimed
), permits AS (
    INSERT INTO redrive_permit (key, job_id, lease_token, at)
    SELECT k.key, c.id, c.lease_token, clock_timestamp()
    FROM claimed AS c
    JOIN jsonb_to_recordset(%(keys)s) AS k(id uuid, key text) ON k.id = c.id
)
SELECT id, task, queue, priority, run_at, attempts, max_attempts, owner, lease_token, lease_owner,
       lease_expires_at, last_error_code, last_error_message, created_at, updated_at, started_at,
       stage, manual_retry_count, first_failed_at, idempotency_key, version,
       jsonb_build_array(args, kwargs, stage_attempts, checkpoint, dependencies) AS payload
FROM claimed ORDER BY priority, run_at;

-- name: lease_lock
SELECT 1 AS held FROM redrive_job WHERE id = %(id)s AND lease_token = %(token)s AND lease_expires_at > now() FOR SHARE;

-- name: leases_extend
UPDATE redrive_job AS j
SET lease_expires_at = now() + %(lease_ttl)s
FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS l(id, token)
WHERE j.id = l.id AND j.lease_token = l.token AND j.lease_expires_at > now()
RETURNING j.id, j.lease_token;
