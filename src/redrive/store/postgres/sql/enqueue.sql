-- Enqueue: one job, a batch of plain ones in one statement, a chunk of any
-- kind (keys, trace contexts), and the runs a taken key points at.

-- name: jobs_insert
-- Keyed jobs (the others go through jobs_insert_plain). Each first claims its key: a new key, or a take-over (a higher version;
-- a failed or cancelled content twin) points it at the new run; a key already
-- taken leaves the job out (the caller reads the twin afterwards). The input is
-- sorted by key so two batches lock keys in the same order.
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(jobs)s) AS x(
        id uuid, task text, queue text, args jsonb, kwargs jsonb, priority smallint,
        max_attempts integer, owner text, run_at timestamptz, delay_s double precision,
        stage text, dependencies jsonb, idempotency_key text, version integer,
        kind text, fingerprint text, nonce uuid, trace jsonb)
), keyed AS (
    INSERT INTO redrive_job_key AS k (task, owner, key, kind, version, job_id, fingerprint,
                                      nonce, created_at, updated_at)
    SELECT task, coalesce(owner, ''), idempotency_key, kind, version, id, fingerprint,
           nonce, now(), now()
    FROM input
    ORDER BY task, coalesce(owner, ''), idempotency_key
    ON CONFLICT (task, owner, key) DO UPDATE
    SET version = excluded.version, job_id = excluded.job_id,
        fingerprint = excluded.fingerprint, nonce = excluded.nonce, updated_at = now()
    WHERE excluded.version > k.version
       OR (k.kind = 'content' AND EXISTS (
            SELECT 1 FROM redrive_job_done AS d
            WHERE d.id = k.job_id AND d.status IN ('failed', 'cancelled')))
    RETURNING k.nonce
), inserted AS (
    INSERT INTO redrive_job (id, task, queue, args, kwargs, status, priority, run_at,
                             attempts, max_attempts, owner, created_at, updated_at, stage,
                             dependencies, idempotency_key, version, implied_enqueued)
    SELECT id, task, queue, coalesce(args, '[]'), nullif(kwargs, '{}'),
           CASE WHEN due > now() THEN 'scheduled' ELSE 'queued' END,
           coalesce(priority, 0), due, 0, max_attempts, owner, now(), NULL, stage,
           nullif(dependencies, '[]'), idempotency_key, nullif(version, 1),
           CASE WHEN due <= now() AND trace IS NULL THEN nextval('redrive_job_event_id_seq') END
    FROM (SELECT *, coalesce(run_at, now() + make_interval(secs => coalesce(delay_s, 0))) AS due
          FROM input) AS rows
    WHERE nonce IN (SELECT nonce FROM keyed)
    RETURNING id, status, run_at, created_at, queue, implied_enqueued
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT i.id, now(), NULL, i.status, 0,
           CASE WHEN x.trace IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('trace', x.trace) END
    FROM inserted AS i JOIN input AS x ON x.id = i.id
    WHERE i.implied_enqueued IS NULL
), wake AS (
    SELECT pg_notify('redrive_jobs', queue)
    FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'queued') AS due_queues
)
-- The answer (jobs_insert_plain's is the same, less its jobs due at the
-- statement's clock): a row per inserted job, its id as the
-- 32 hex digits the client sent (the client matches rows to its own JSON's
-- ids: hashing text is cheaper than decoding and hashing a UUID), its status
-- and its due time where that is not the statement's clock; then one row
-- with no id and that clock, the creation time of every job. Most jobs are due
-- at once, and a time read is a Python object built per row.
SELECT replace(id::text, '-', ''), status, nullif(run_at, now()) FROM inserted
UNION ALL
SELECT NULL, NULL, now() FROM (SELECT count(*) FROM wake) AS woken;

-- name: jobs_insert_plain
-- Jobs without a key (most batches): jobs_insert's work without the key step,
-- and with what the batch's jobs share given once: the trace context of
-- their events (rather than carried by every job and joined back: a tenth
-- less server CPU a job) and their task's dependencies (JSON the client does
-- not write and the server does not read for each job).
WITH inserted AS (
    INSERT INTO redrive_job (id, task, queue, args, kwargs, status, priority, run_at,
                             attempts, max_attempts, owner, created_at, updated_at, stage,
                             dependencies, idempotency_key, version, implied_enqueued)
    SELECT id, task, queue, coalesce(args, '[]'), nullif(kwargs, '{}'),
           CASE WHEN due > now() THEN 'scheduled' ELSE 'queued' END,
           coalesce(priority, 0), due, 0, max_attempts, owner, now(), NULL, stage,
           nullif(%(dependencies)s::jsonb, '[]'), NULL, NULL,
           CASE WHEN due <= now() AND %(meta)s::jsonb = '{}' THEN nextval('redrive_job_event_id_seq') END
    FROM (SELECT *, coalesce(run_at, now() + make_interval(secs => coalesce(delay_s, 0))) AS due
          FROM jsonb_to_recordset(%(jobs)s) AS x(
              id uuid, task text, queue text, args jsonb, kwargs jsonb, priority smallint,
              max_attempts integer, owner text, run_at timestamptz, delay_s double precision,
              stage text)) AS rows
    RETURNING id, status, run_at, created_at, queue, implied_enqueued
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), NULL, status, 0, %(meta)s FROM inserted WHERE implied_enqueued IS NULL
), wake AS (
    SELECT pg_notify('redrive_jobs', queue)
    FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'queued') AS due_queues
)
-- Answered as jobs_insert is, less the jobs due at the statement's clock:
-- without a key nothing leaves a job out, so the client knows each of those
-- was inserted, queued and due then, and most batches answer with one row.
SELECT replace(id::text, '-', ''), status, run_at FROM inserted WHERE run_at <> now()
UNION ALL
SELECT NULL, NULL, now() FROM (SELECT count(*) FROM wake) AS woken;

-- name: jobs_copy_start
-- A batch written by COPY (Enqueue._insert_copied): the transaction's clock,
-- an id for each job's implied creation event, and its queues woken at commit.
SELECT now(), array(SELECT nextval('redrive_job_event_id_seq') FROM generate_series(1, %(jobs)s)),
       (SELECT count(pg_notify('redrive_jobs', queue)) FROM unnest(%(queues)s::text[]) AS queue);

-- name: jobs_copy
-- created_at and run_at are left to their default, the transaction's now()
-- that jobs_copy_start answered (migration 0041).
COPY redrive_job (id, args, kwargs, implied_enqueued, task, queue, status, priority, attempts,
                  max_attempts, owner, stage, dependencies)
FROM STDIN;

-- name: job_insert
-- One job without a key (most single enqueues): jobs_insert's work with typed
-- parameters, so the server takes no JSON apart and plans no key step (a
-- third faster a call). An empty value comes as NULL: nothing to encode.
WITH inserted AS (
    INSERT INTO redrive_job (id, task, queue, args, kwargs, status, priority, run_at,
                             attempts, max_attempts, owner, created_at, updated_at, stage,
                             dependencies, idempotency_key, version, implied_enqueued)
    SELECT %(id)s, %(task)s, %(queue)s, coalesce(%(args)s::jsonb, '[]'), nullif(%(kwargs)s::jsonb, '{}'),
           CASE WHEN due > now() THEN 'scheduled' ELSE 'queued' END,
           %(priority)s, due, 0, %(max_attempts)s, %(owner)s, now(), NULL, %(stage)s,
           nullif(%(dependencies)s::jsonb, '[]'), NULL, NULL,
           CASE WHEN due <= now() AND %(meta)s::jsonb IS NULL THEN nextval('redrive_job_event_id_seq') END
    FROM (SELECT coalesce(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay_s)s)) AS due) AS d
    RETURNING id, status, run_at, created_at, queue, implied_enqueued
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), NULL, status, 0, coalesce(%(meta)s::jsonb, '{}') FROM inserted WHERE implied_enqueued IS NULL
), wake AS (
    SELECT pg_notify('redrive_jobs', queue) FROM inserted WHERE status = 'queued'
)
SELECT status, run_at, created_at, (SELECT count(*) FROM wake) AS woken FROM inserted;

-- name: job_keys_get
-- The runs that keys point at, with what the key row remembers of them.
SELECT k.version AS key_version, k.fingerprint AS key_fingerprint, k.key AS key_name,
       k.task AS key_task, k.owner AS key_owner, j.*
FROM redrive_job_key AS k
JOIN (SELECT {_job_columns} FROM redrive_job UNION ALL SELECT {_job_columns} FROM redrive_job_done) AS j
    ON j.id = k.job_id
WHERE (k.task, k.owner, k.key) IN (
    SELECT * FROM jsonb_to_recordset(%(keys)s) AS x(task text, owner text, key text));
