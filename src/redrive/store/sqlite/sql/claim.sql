-- The claim (due jobs by priority, with limits and their permits) and the leases.

-- name: jobs_due
-- Read in the claim's order from its own index: the waiting-jobs index (by
-- queue, for the counts) also matches this filter, and SQLite would read a
-- queue's every due job from it and sort them all for one batch.
SELECT id, status FROM redrive_job INDEXED BY redrive_job_due
WHERE status IN ('scheduled', 'queued') AND run_at <= :now
  AND queue IN (SELECT value FROM json_each(:queues))
  AND (:blocked IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(redrive_job.dependencies) AS d
        WHERE d.value IN (SELECT value FROM json_each(:blocked))))
ORDER BY priority, run_at
LIMIT :limit;

-- name: jobs_due_limited
-- The due jobs a claim with limits looks through (core/limits.py picks).
SELECT id, status, queue, owner, dependencies FROM redrive_job INDEXED BY redrive_job_due
WHERE status IN ('scheduled', 'queued') AND run_at <= :now
  AND queue IN (SELECT value FROM json_each(:queues))
  AND (:blocked IS NULL OR NOT EXISTS (
        SELECT 1 FROM json_each(redrive_job.dependencies) AS d
        WHERE d.value IN (SELECT value FROM json_each(:blocked))))
ORDER BY priority, run_at
LIMIT :limit;

-- name: permits_forget
-- Only the keys this claim reads, whose rules it holds: another queue's
-- window may be longer than any of this claim's rules keep.
DELETE FROM redrive_permit
WHERE key IN (SELECT value FROM json_each(:keys)) AND at < :now - :keep_s
  AND NOT EXISTS (SELECT 1 FROM redrive_job AS j
                  WHERE j.id = redrive_permit.job_id AND j.lease_token = redrive_permit.lease_token);

-- name: permits_read
SELECT p.key, :now - p.at AS age_s, j.id IS NOT NULL AS running
FROM redrive_permit AS p
LEFT JOIN redrive_job AS j ON j.id = p.job_id AND j.lease_token = p.lease_token
WHERE p.key IN (SELECT value FROM json_each(:keys));

-- name: permits_add
INSERT INTO redrive_permit (key, job_id, lease_token, at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), :now
FROM json_each(:permits);

-- name: jobs_claim
-- :due is a JSON array of [id, status] from jobs_due, in claim order.
UPDATE redrive_job
SET status = 'running',
    attempts = attempts + 1,
    lease_token = lower(hex(randomblob(16))),
    lease_owner = :worker_id,
    lease_expires_at = :now + :lease_ttl_s,
    started_at = coalesce(started_at, :now),
    updated_at = :now
WHERE id IN (SELECT json_extract(value, '$[0]') FROM json_each(:due))
-- _claimed reads these by position; the JSON columns come as one value (one
-- decode per job instead of five).
RETURNING id, task, queue, priority, run_at, attempts, max_attempts, owner, lease_token,
    lease_owner, lease_expires_at, last_error_code, last_error_message, created_at, updated_at,
    started_at, stage, manual_retry_count, first_failed_at, idempotency_key, version,
    json_array(json(args), json(kwargs), json(stage_attempts), json(checkpoint),
               json(dependencies)) AS payload;

-- name: jobs_claim_events
-- :claimed is a JSON array of [id, from_status, attempt] from the claim's own
-- rows: nothing is looked up again.
INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
SELECT json_extract(value, '$[0]'), :now, json_extract(value, '$[1]'), 'running', json_extract(value, '$[2]'), :meta
FROM json_each(:claimed);

-- name: lease_extend
UPDATE redrive_job SET lease_expires_at = :now + :lease_ttl_s
WHERE id = :id AND lease_token = :token AND lease_expires_at > :now
RETURNING id;

-- name: lease_held
SELECT 1 AS held FROM redrive_job WHERE id = :id AND lease_token = :token AND lease_expires_at > :now;
