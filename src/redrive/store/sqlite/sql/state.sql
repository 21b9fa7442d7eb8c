-- The state every worker shares: breakers, outbox rows, schedules'
-- checkpoints, the worker registry, and the rollups' folding.

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

-- name: schedule_create
INSERT INTO redrive_schedule (name, fired_until, updated_at) VALUES (:name, :at, :now)
ON CONFLICT (name) DO NOTHING;

-- name: schedule_get
SELECT fired_until FROM redrive_schedule WHERE name = :name;

-- name: schedule_advance
UPDATE redrive_schedule SET fired_until = max(fired_until, :to), updated_at = :now WHERE name = :name;

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
