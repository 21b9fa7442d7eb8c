-- Named queries of SQLiteStore. Parameters: :name. Times are REAL epoch
-- seconds; the store reads "now" from SQLite once per transaction.

-- name: now
SELECT (julianday('now') - 2440587.5) * 86400.0 AS now;

-- name: migration_table_create
CREATE TABLE IF NOT EXISTS redrive_migration (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
);

-- name: migration_version
SELECT coalesce(max(version), 0) AS version FROM redrive_migration;

-- name: migration_table_exists
SELECT count(*) AS present FROM sqlite_master WHERE type = 'table' AND name = 'redrive_migration';

-- name: migration_record
INSERT INTO redrive_migration (version, name) VALUES (:version, :name);

-- name: job_insert
INSERT INTO redrive_job (id, task, queue, args, kwargs, status, priority, run_at,
                         attempts, max_attempts, owner, created_at, updated_at, stage,
                         dependencies, idempotency_key, version)
VALUES (:id, :task, :queue, :args, :kwargs, :status, :priority, :run_at,
        0, :max_attempts, :owner, :now, :now, :stage, :dependencies, :idempotency_key, :version);

-- name: job_key_get
SELECT * FROM redrive_job_key WHERE task = :task AND owner = :owner AND key = :key;

-- name: job_key_put
INSERT INTO redrive_job_key (task, owner, key, kind, version, job_id, fingerprint, nonce,
                             created_at, updated_at)
VALUES (:task, :owner, :key, :kind, :version, :job_id, :fingerprint, :job_id, :now, :now)
ON CONFLICT (task, owner, key) DO UPDATE
SET version = excluded.version, job_id = excluded.job_id, fingerprint = excluded.fingerprint,
    nonce = excluded.nonce, updated_at = excluded.updated_at;

-- name: event_insert
INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
VALUES (:job_id, :at, :from_status, :to_status, :attempt, :meta);

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
DELETE FROM redrive_job WHERE id = :id AND status IN ('scheduled', 'queued') RETURNING *;

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

-- name: dead_letters_resolve
UPDATE redrive_dead_letter
SET resolved_at = :now, resolved_by = :by,
    notes = CASE WHEN :note IS NULL THEN notes
                 ELSE json_insert(notes, '$[#]', json_object('at', :at, 'by', :by, 'text', :note)) END
WHERE id IN (SELECT value FROM json_each(:ids)) AND replayed_at IS NULL AND resolved_at IS NULL
RETURNING *;

-- name: dead_letter_note
UPDATE redrive_dead_letter
SET notes = json_insert(notes, '$[#]', json_object('at', :at, 'by', :by, 'text', :text))
WHERE id = :id
RETURNING *;

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

-- name: jobs_prunable
-- Oldest history first. A job whose dead letter is still open waits for an operator.
SELECT d.id FROM redrive_job_done AS d
WHERE d.finished_at < :before
  AND NOT EXISTS (SELECT 1 FROM redrive_dead_letter AS l
                  WHERE l.job_id = d.id AND l.replayed_at IS NULL AND l.resolved_at IS NULL)
ORDER BY d.finished_at
LIMIT :limit;

-- name: jobs_deletable
SELECT id FROM redrive_job_done WHERE id IN (SELECT value FROM json_each(:ids));

-- name: prune_jobs
DELETE FROM redrive_job_done WHERE id IN (SELECT value FROM json_each(:ids));

-- name: prune_events
DELETE FROM redrive_job_event WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: prune_letters
DELETE FROM redrive_dead_letter WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: prune_keys
DELETE FROM redrive_job_key WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: prune_permits
DELETE FROM redrive_permit WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: prune_cancel_requests
DELETE FROM redrive_cancel_request WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: cancel_request_add
INSERT INTO redrive_cancel_request (job_id, by, at)
SELECT id, :by, :now FROM redrive_job WHERE id = :id AND status = 'running'
ON CONFLICT (job_id) DO NOTHING;

-- name: cancel_request_take
DELETE FROM redrive_cancel_request WHERE job_id = :id RETURNING by;

-- name: control_read
SELECT 'cancel' AS kind, job_id AS name, by FROM redrive_cancel_request
WHERE job_id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT 'pause', queue, by FROM redrive_queue_pause;

-- name: queue_pause
INSERT INTO redrive_queue_pause (queue, by, at) VALUES (:queue, :by, :now)
ON CONFLICT (queue) DO NOTHING RETURNING queue;

-- name: queue_resume
DELETE FROM redrive_queue_pause WHERE queue = :queue RETURNING queue;

-- name: queues_stats
-- Never a scan of the table (migration 0018's index): the queues found by
-- skipping through the index, then per queue and waiting state a count of
-- its index entries that stops at :cap (then the store says "at least") and
-- its first (oldest) one; running jobs apart.
WITH RECURSIVE queues(queue) AS (
    SELECT (SELECT queue FROM redrive_job WHERE status IN ('scheduled', 'queued') ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM redrive_job AS j
            WHERE j.status IN ('scheduled', 'queued') AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
    FROM queues AS q WHERE q.queue IS NOT NULL
)
SELECT q.queue, s.status,
    (SELECT count(*) FROM (SELECT 1 FROM redrive_job AS j
                           WHERE j.queue = q.queue AND j.status = s.status AND j.status IN ('scheduled', 'queued')
                           LIMIT :cap)) AS n,
    (SELECT min(j.run_at) FROM redrive_job AS j
     WHERE j.queue = q.queue AND j.status = s.status AND j.status IN ('scheduled', 'queued')
       AND j.run_at <= :now) AS oldest_due,
    NULL AS oldest_running
FROM queues AS q CROSS JOIN (SELECT 'scheduled' AS status UNION ALL SELECT 'queued') AS s
WHERE q.queue IS NOT NULL
UNION ALL
SELECT queue, 'running', count(*), NULL, min(started_at)
FROM redrive_job
WHERE status = 'running'
GROUP BY queue
ORDER BY 1, 2;

-- name: runs_ended
SELECT d.finished_at AS at, d.task, d.status = 'failed' AS failed,
    (SELECT json_extract(e.meta, '$.duration_ms') / 1000.0 FROM redrive_job_event AS e
     WHERE e.job_id = d.id ORDER BY e.id DESC LIMIT 1) AS duration_s
FROM redrive_job_done AS d
WHERE d.finished_at >= :since AND d.status IN ('succeeded', 'failed')
ORDER BY d.finished_at DESC
LIMIT :limit;

-- name: alert_fire
INSERT INTO redrive_alert (rule, incident, detail, fired_at) VALUES (:rule, :incident, :detail, :now)
ON CONFLICT (rule) DO NOTHING
RETURNING rule;

-- name: alert_resolve
DELETE FROM redrive_alert WHERE rule = :rule AND incident = :incident RETURNING rule;

-- name: breaker_get
SELECT data FROM redrive_breaker WHERE name = :name;

-- name: breaker_upsert
INSERT INTO redrive_breaker (name, state, data, updated_at) VALUES (:name, :state, :data, :now)
ON CONFLICT (name) DO UPDATE SET state = excluded.state, data = excluded.data,
    updated_at = excluded.updated_at;

-- name: breaker_event_insert
INSERT INTO redrive_breaker_event (name, at, from_state, to_state, reason, by)
VALUES (:name, :now, :from_state, :to_state, :reason, :by);

-- name: breakers_list
SELECT name, data FROM redrive_breaker ORDER BY name;

-- name: lease_held
SELECT 1 AS held FROM redrive_job WHERE id = :id AND lease_token = :token AND lease_expires_at > :now;

-- name: schema_present
-- Whether a connection of the caller's is to a database redrive uses.
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'redrive_job';

-- name: outbox_create
INSERT INTO redrive_outbox (key, token, status, job_id, created_at, updated_at)
VALUES (:key, :outbox_token, 'pending', :id, :now, :now)
ON CONFLICT (key) DO NOTHING;

-- name: outbox_get
SELECT * FROM redrive_outbox WHERE key = :key;

-- name: outbox_update
UPDATE redrive_outbox
SET status = :status,
    provider_id = CASE WHEN :provider_id = '' THEN NULL ELSE coalesce(:provider_id, provider_id) END,
    notified_at = CASE WHEN :notified = 1 THEN :now WHEN :notified = 0 THEN NULL ELSE notified_at END,
    error_code = :error_code, error_message = :error_message,
    sends = sends + :send_started, reconciliations = reconciliations + :reconciled,
    job_id = :id, updated_at = :now
WHERE key = :key
RETURNING *;

-- name: outbox_page
SELECT * FROM redrive_outbox
WHERE (:status IS NULL OR status = :status) AND (:job_id IS NULL OR job_id = :job_id)
  AND (:after_at IS NULL OR (created_at, key) > (:after_at, :after_key))
ORDER BY created_at, key
LIMIT :limit;

-- name: schedule_create
INSERT INTO redrive_schedule (name, fired_until, updated_at) VALUES (:name, :at, :now)
ON CONFLICT (name) DO NOTHING;

-- name: schedule_get
SELECT fired_until FROM redrive_schedule WHERE name = :name;

-- name: schedule_advance
UPDATE redrive_schedule SET fired_until = max(fired_until, :to), updated_at = :now WHERE name = :name;

-- name: audit_record
INSERT INTO redrive_audit (at, by, action, job_id, detail)
VALUES (:now, :by, :action, :job_id, :detail)
RETURNING id, at, by, action, job_id, detail;

-- name: worker_forget
DELETE FROM redrive_worker WHERE heartbeat_at < :now - :forget_after_s AND id <> :id;

-- name: worker_report
INSERT INTO redrive_worker (id, host, pid, queues, concurrency, version, running, detail, started_at,
                            heartbeat_at)
VALUES (:id, :host, :pid, :queues, :concurrency, :version, :running, :detail, :now, :now)
ON CONFLICT (id) DO UPDATE SET running = excluded.running, detail = excluded.detail,
    heartbeat_at = excluded.heartbeat_at;

-- name: worker_remove
DELETE FROM redrive_worker WHERE id = :id;

-- name: session_forget_expired
DELETE FROM redrive_session WHERE expires_at < :now;

-- name: session_open
INSERT INTO redrive_session (id, principal, expires_at) VALUES (:id, :principal, :now + :ttl);

-- name: session_read
SELECT principal FROM redrive_session WHERE id = :id AND expires_at > :now;

-- name: session_close
DELETE FROM redrive_session WHERE id = :id;

-- name: schedule_pause
INSERT INTO redrive_schedule (name, fired_until, updated_at, paused_by) VALUES (:name, :at, :now, :by)
ON CONFLICT (name) DO UPDATE SET paused_by = excluded.paused_by, updated_at = :now
WHERE redrive_schedule.paused_by IS NULL
RETURNING name;

-- name: schedule_resume
UPDATE redrive_schedule SET paused_by = NULL, updated_at = :now
WHERE name = :name AND paused_by IS NOT NULL
RETURNING name;

-- name: rollup_add
INSERT INTO redrive_rollup AS r (at, queue, task, shard, kind, bucket, n)
VALUES (:at, :queue, :task, 0, :kind, :bucket, :n)
ON CONFLICT (at, queue, task, shard, kind, bucket) DO UPDATE SET n = r.n + excluded.n;

-- name: rollups_fold
-- Rows older than :before become rows :grain_s wide, added to what such a row
-- holds already; rollups_folded then drops the rows moved (one transaction,
-- one writer; a row that stays starts a :grain_s, so none is both).
INSERT INTO redrive_rollup AS r (at, queue, task, shard, kind, bucket, n)
SELECT at / :grain_s * :grain_s, queue, task, 0, kind, bucket, sum(n)
FROM redrive_rollup
WHERE at < :before AND at % :grain_s <> 0
GROUP BY at / :grain_s * :grain_s, queue, task, kind, bucket
ON CONFLICT (at, queue, task, shard, kind, bucket) DO UPDATE SET n = r.n + excluded.n;

-- name: rollups_folded
DELETE FROM redrive_rollup WHERE at < :before AND at % :grain_s <> 0;
