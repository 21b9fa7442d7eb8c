-- Named queries of PostgresStore. Each is one statement, so it is atomic on an
-- autocommit connection and costs one round trip. Parameters: %(name)s.

-- name: now
SELECT now() AS now;

-- name: migration_lock
SELECT pg_advisory_lock(7210143151);

-- name: migration_unlock
SELECT pg_advisory_unlock(7210143151);

-- name: migration_table_create
CREATE TABLE IF NOT EXISTS redrive_migration (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migration_version
SELECT coalesce(max(version), 0) AS version FROM redrive_migration;

-- name: migration_table_exists
SELECT to_regclass('redrive_migration') IS NOT NULL AS present;

-- name: migration_record
INSERT INTO redrive_migration (version, name) VALUES (%(version)s, %(name)s);

-- name: wakeups_listen
LISTEN redrive_jobs;

-- name: jobs_insert
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(jobs)s) AS x(
        id uuid, task text, queue text, args jsonb, kwargs jsonb, priority smallint,
        max_attempts integer, owner text, run_at timestamptz, delay_s double precision)
), inserted AS (
    INSERT INTO redrive_job (id, task, queue, args, kwargs, status, priority, run_at,
                             attempts, max_attempts, owner, created_at, updated_at)
    SELECT id, task, queue, args, kwargs,
           CASE WHEN due > now() THEN 'scheduled' ELSE 'queued' END,
           priority, due, 0, max_attempts, owner, now(), now()
    FROM (SELECT *, coalesce(run_at, now() + make_interval(secs => coalesce(delay_s, 0))) AS due
          FROM input) AS rows
    RETURNING *
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt)
    SELECT id, now(), NULL, status, 0 FROM inserted
), wake AS (
    SELECT pg_notify('redrive_jobs', queue)
    FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'queued') AS due_queues
)
SELECT inserted.*, (SELECT count(*) FROM wake) AS woken FROM inserted;

-- name: jobs_claim
WITH picked AS (
    SELECT id, status AS from_status
    FROM redrive_job
    WHERE status IN ('scheduled', 'queued') AND run_at <= now() AND queue = ANY(%(queues)s)
    ORDER BY priority, run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE redrive_job AS j
    SET status = 'running',
        attempts = j.attempts + 1,
        lease_token = gen_random_uuid(),
        lease_owner = %(worker_id)s,
        lease_expires_at = now() + %(lease_ttl)s,
        started_at = coalesce(j.started_at, now()),
        updated_at = now()
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.*, picked.from_status
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), from_status, 'running', attempts,
           jsonb_build_object('worker', %(worker_id)s::text)
    FROM claimed
)
SELECT * FROM claimed ORDER BY priority, run_at;

-- name: leases_extend
UPDATE redrive_job AS j
SET lease_expires_at = now() + %(lease_ttl)s
FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS l(id, token)
WHERE j.id = l.id AND j.lease_token = l.token
RETURNING j.id;

-- name: jobs_complete
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(items)s) AS x(id uuid, token uuid, result jsonb, meta jsonb)
), moved AS (
    DELETE FROM redrive_job AS j USING input AS i
    WHERE j.id = i.id AND j.lease_token = i.token
    RETURNING j.*, i.result AS new_result, i.meta AS event_meta
), done AS (
    INSERT INTO redrive_job_done (id, task, queue, args, kwargs, status, priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message, result,
        created_at, updated_at, started_at, finished_at)
    SELECT id, task, queue, args, kwargs, 'succeeded', priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message, new_result,
        created_at, now(), started_at, now()
    FROM moved
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), 'running', 'succeeded', attempts, event_meta FROM moved
)
SELECT id FROM moved;

-- name: jobs_fail
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(items)s) AS x(
        id uuid, token uuid, error_code text, error_message text, meta jsonb)
), moved AS (
    DELETE FROM redrive_job AS j USING input AS i
    WHERE j.id = i.id AND j.lease_token = i.token
    RETURNING j.*, i.error_code AS new_code, i.error_message AS new_message, i.meta AS event_meta
), done AS (
    INSERT INTO redrive_job_done (id, task, queue, args, kwargs, status, priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        error_code, error_message, created_at, updated_at, started_at, finished_at, failed_at)
    SELECT id, task, queue, args, kwargs, 'failed', priority, run_at,
        attempts, max_attempts, owner, new_code, new_message,
        new_code, new_message, created_at, now(), started_at, now(), now()
    FROM moved
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), 'running', 'failed', attempts,
           jsonb_build_object('error_code', new_code) || event_meta
    FROM moved
)
SELECT id FROM moved;

-- name: jobs_retry
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(items)s) AS x(
        id uuid, token uuid, delay_s double precision, error_code text,
        error_message text, meta jsonb)
), retried AS (
    UPDATE redrive_job AS j
    SET status = 'queued',
        run_at = now() + make_interval(secs => i.delay_s),
        lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
        last_error_code = i.error_code, last_error_message = i.error_message,
        updated_at = now()
    FROM input AS i
    WHERE j.id = i.id AND j.lease_token = i.token
    RETURNING j.id, j.attempts, i.error_code, i.delay_s, i.meta
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), 'running', 'queued', attempts,
           jsonb_build_object('error_code', error_code, 'delay_ms', round(delay_s * 1000)) || meta
    FROM retried
)
SELECT id FROM retried;

-- name: jobs_requeue
WITH requeued AS (
    UPDATE redrive_job AS j
    SET status = 'queued', run_at = now(), attempts = j.attempts - 1,
        lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS l(id, token)
    WHERE j.id = l.id AND j.lease_token = l.token
    RETURNING j.id, j.attempts, j.queue
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), 'running', 'queued', attempts, '{"reason": "shutdown"}'::jsonb
    FROM requeued
), wake AS (
    SELECT pg_notify('redrive_jobs', queue) FROM (SELECT DISTINCT queue FROM requeued) AS q
)
SELECT id, (SELECT count(*) FROM wake) AS woken FROM requeued;

-- name: jobs_reclaim
WITH expired AS (
    SELECT id, lease_owner
    FROM redrive_job
    WHERE status = 'running' AND lease_expires_at <= now()
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), requeued AS (
    UPDATE redrive_job AS j
    SET status = 'queued', run_at = now(),
        lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    FROM expired AS e
    WHERE j.id = e.id AND j.attempts < j.max_attempts
    RETURNING j.id, j.attempts, j.queue, e.lease_owner AS old_owner
), exhausted AS (
    DELETE FROM redrive_job AS j USING expired AS e
    WHERE j.id = e.id AND j.attempts >= j.max_attempts
    RETURNING j.*, e.lease_owner AS old_owner
), done AS (
    INSERT INTO redrive_job_done (id, task, queue, args, kwargs, status, priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        error_code, error_message, created_at, updated_at, started_at, finished_at, failed_at)
    SELECT id, task, queue, args, kwargs, 'failed', priority, run_at,
        attempts, max_attempts, owner, %(code)s, %(message)s,
        %(code)s, %(message)s, created_at, now(), started_at, now(), now()
    FROM exhausted
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), 'running', 'queued', attempts,
           jsonb_build_object('reason', 'lease_expired', 'worker', old_owner)
    FROM requeued
    UNION ALL
    SELECT id, now(), 'running', 'failed', attempts,
           jsonb_build_object('reason', 'lease_expired', 'worker', old_owner,
                              'error_code', %(code)s::text)
    FROM exhausted
), wake AS (
    SELECT pg_notify('redrive_jobs', queue) FROM (SELECT DISTINCT queue FROM requeued) AS q
)
SELECT id, attempts, (SELECT count(*) FROM wake) AS woken FROM requeued
UNION ALL
SELECT id, attempts, 0 FROM exhausted;

-- name: job_cancel
WITH moved AS (
    DELETE FROM redrive_job
    WHERE id = %(id)s AND status IN ('scheduled', 'queued')
    RETURNING *
), done AS (
    INSERT INTO redrive_job_done (id, task, queue, args, kwargs, status, priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        created_at, updated_at, started_at, finished_at)
    SELECT id, task, queue, args, kwargs, 'cancelled', priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        created_at, now(), started_at, now()
    FROM moved
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt)
    SELECT id, now(), status, 'cancelled', attempts FROM moved
)
SELECT id FROM moved;

-- name: job_get
SELECT * FROM redrive_job WHERE id = %(id)s
UNION ALL
SELECT * FROM redrive_job_done WHERE id = %(id)s;

-- name: jobs_list
SELECT * FROM (
    SELECT * FROM redrive_job
    UNION ALL
    SELECT * FROM redrive_job_done
) AS j
WHERE (%(statuses)s::text[] IS NULL OR status = ANY(%(statuses)s::text[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;

-- name: jobs_count
SELECT status, count(*) AS n FROM redrive_job GROUP BY status
UNION ALL
SELECT status, count(*) AS n FROM redrive_job_done GROUP BY status;

-- name: job_events_list
SELECT * FROM redrive_job_event WHERE job_id = %(id)s ORDER BY id;
