-- Every state change of a job after its enqueue: a running or waiting job
-- taken out of the live table and ended into the history, a retry, a
-- requeue, a failure's dead letter, a revival, stages saved, cancels.

-- name: job_take_running
DELETE FROM redrive_job WHERE id = :id AND lease_token = :token AND lease_expires_at > :fence RETURNING *;

-- name: jobs_complete_copy
-- The first of three statements of a batch of completions: the jobs whose
-- lease still holds go to history as succeeded. :items is a JSON array of
-- {id, token, result}, result as JSON text.
INSERT INTO redrive_job_done (id, task, queue, args, kwargs, status, priority, run_at,
    attempts, max_attempts, owner, last_error_code, last_error_message, result,
    created_at, updated_at, started_at, finished_at,
    stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
    idempotency_key, version)
SELECT j.id, j.task, j.queue, j.args, j.kwargs, 'succeeded', j.priority, j.run_at,
    j.attempts, j.max_attempts, j.owner, j.last_error_code, j.last_error_message,
    json_extract(i.value, '$.result'), j.created_at, :now, j.started_at, :now,
    j.stage, j.stage_attempts, j.checkpoint, j.manual_retry_count, j.first_failed_at,
    j.dependencies, j.idempotency_key, j.version
FROM json_each(:items) AS i
JOIN redrive_job AS j ON j.id = json_extract(i.value, '$.id') AND j.lease_token = json_extract(i.value, '$.token') AND j.lease_expires_at > :now
RETURNING id;

-- name: jobs_complete_events
-- :moved is a JSON array of [id, attempt, meta] for the jobs the copy moved,
-- from the rows jobs_remove answered: nothing is looked up again.
INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
SELECT json_extract(value, '$[0]'), :now, 'running', 'succeeded', json_extract(value, '$[1]'),
       json_extract(value, '$[2]')
FROM json_each(:moved);

-- name: jobs_remove
DELETE FROM redrive_job WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING id, lease_token, task, queue, attempts, stage;

-- name: job_take_waiting
DELETE FROM redrive_job WHERE id = :id AND status IN ('pending', 'blocked', 'scheduled', 'queued') RETURNING *;

-- name: job_done_insert
INSERT INTO redrive_job_done (id, task, queue, args, kwargs, status, priority, run_at,
    attempts, max_attempts, owner, lease_token, lease_owner, lease_expires_at,
    last_error_code, last_error_message, error_code, error_message, result,
    created_at, updated_at, started_at, finished_at, failed_at,
    stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
    idempotency_key, version)
VALUES (:id, :task, :queue, :args, :kwargs, :status, :priority, :run_at,
    :attempts, :max_attempts, :owner, :lease_token, :lease_owner, :lease_expires_at,
    :last_error_code, :last_error_message, :error_code, :error_message, :result,
    :created_at, :updated_at, :started_at, :finished_at, :failed_at,
    :stage, :stage_attempts, :checkpoint, :manual_retry_count, :first_failed_at, :dependencies,
    :idempotency_key, :version);

-- name: job_revived_insert
INSERT INTO redrive_job (id, task, queue, args, kwargs, status, priority, run_at,
    attempts, max_attempts, owner, last_error_code, last_error_message,
    created_at, updated_at, started_at,
    stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
    idempotency_key, version)
VALUES (:id, :task, :queue, :args, :kwargs, 'queued', :priority, :now,
    0, :max_attempts, :owner, :last_error_code, :last_error_message,
    :created_at, :now, :started_at,
    :stage, :stage_attempts, :checkpoint, :manual_retry_count, NULL, :dependencies,
    :idempotency_key, :version)
RETURNING *;

-- name: job_take_failed
-- Only the failure a revive plan was made from (its failed_at, within the
-- microsecond a datetime keeps of SQLite's REAL seconds).
DELETE FROM redrive_job_done
WHERE id = :id AND status = 'failed' AND abs(failed_at - :failed_at) < 0.000002
RETURNING *;

-- name: job_retry
UPDATE redrive_job
SET status = 'queued', run_at = :now + :delay_s,
    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
    last_error_code = :error_code, last_error_message = :error_message,
    stage = coalesce(:stage, stage),
    stage_attempts = coalesce(:stage_attempts, stage_attempts),
    first_failed_at = coalesce(first_failed_at, :now),
    updated_at = :now
WHERE id = :id AND lease_token = :token AND lease_expires_at > :fence
RETURNING task, queue, attempts, stage;

-- name: stage_save
UPDATE redrive_job
SET checkpoint = json_set(checkpoint, '$.' || json_quote(:stage), json(:output)),
    stage_attempts = :stage_attempts,
    stage = coalesce(:next_stage, :stage),
    updated_at = :now
WHERE id = :id AND lease_token = :token AND lease_expires_at > :now
RETURNING id;

-- name: progress_save
INSERT INTO redrive_progress (job_id, at, value)
SELECT id, :now, :value FROM redrive_job
WHERE id = :id AND lease_token = :token AND status = 'running' AND lease_expires_at > :now
ON CONFLICT (job_id) DO UPDATE SET at = excluded.at, value = excluded.value
RETURNING job_id;

-- name: dead_letter_previous
SELECT id, error_class, replayed_at FROM redrive_dead_letter
WHERE job_id = :job_id ORDER BY id DESC LIMIT 1;

-- name: dead_letter_insert
INSERT INTO redrive_dead_letter (job_id, task, queue, owner, error_class, error_code,
    error_message, retryable, stage, stage_attempts, attempts, last_stack, context,
    first_failure_at, last_failure_at, escalated, previous_id)
VALUES (:job_id, :task, :queue, :owner, :error_class, :error_code,
    :error_message, :retryable, :stage, :stage_attempts, :attempts, :last_stack, :context,
    :first_failure_at, :last_failure_at, :escalated, :previous_id)
RETURNING id;

-- name: dead_letter_open_check
SELECT 1 FROM redrive_dead_letter
WHERE id = :id AND job_id = :job_id AND replayed_at IS NULL AND resolved_at IS NULL;

-- name: dead_letters_mark_replayed
UPDATE redrive_dead_letter
SET replayed_at = :now, replayed_by = :by, replay_from = :replay_from
WHERE job_id = :job_id AND replayed_at IS NULL AND resolved_at IS NULL
RETURNING id;

-- name: job_requeue
UPDATE redrive_job
SET status = 'queued', run_at = :now + :delay_s, attempts = attempts - :refund,
    lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = :now
WHERE id = :id AND lease_token = :token AND lease_expires_at > :fence
RETURNING task, queue, attempts, stage;

-- name: jobs_expired
SELECT id, lease_token, lease_owner, attempts, max_attempts FROM redrive_job
WHERE status = 'running' AND lease_expires_at <= :now
ORDER BY lease_expires_at
LIMIT :limit;

-- name: cancel_request_add
INSERT INTO redrive_cancel_request (job_id, by, at)
SELECT id, :by, :now FROM redrive_job WHERE id = :id AND status = 'running'
ON CONFLICT (job_id) DO NOTHING;

-- name: cancel_request_take
DELETE FROM redrive_cancel_request WHERE job_id = :id RETURNING by;

-- name: rollup_add
INSERT INTO redrive_rollup AS r (at, queue, task, shard, kind, bucket, n)
VALUES (:at, :queue, :task, 0, :kind, :bucket, :n)
ON CONFLICT (at, queue, task, shard, kind, bucket) DO UPDATE SET n = r.n + excluded.n;
