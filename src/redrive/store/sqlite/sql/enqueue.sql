-- Enqueue: a job, its idempotency key, and its first event.

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
