-- Named queries of PostgresStore. Each is one statement, so it is atomic on an
-- autocommit connection and costs one round trip. Parameters: %(name)s.

-- name: now
SELECT now() AS now;

-- name: migration_lock
SELECT pg_advisory_xact_lock(7210143151);

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

-- name: finishes_listen
LISTEN redrive_done;

-- name: result_waiter_add
INSERT INTO redrive_result_waiter (job_id, waiter) VALUES (%(job_id)s, %(waiter)s);

-- name: result_waiter_remove
DELETE FROM redrive_result_waiter WHERE job_id = %(job_id)s AND waiter = %(waiter)s;

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
                             dependencies, idempotency_key, version)
    SELECT id, task, queue, coalesce(args, '[]'), coalesce(kwargs, '{}'),
           CASE WHEN due > now() THEN 'scheduled' ELSE 'queued' END,
           coalesce(priority, 0), due, 0, max_attempts, owner, now(), now(), stage,
           coalesce(dependencies, '[]'), idempotency_key, version
    FROM (SELECT *, coalesce(run_at, now() + make_interval(secs => coalesce(delay_s, 0))) AS due
          FROM input) AS rows
    WHERE nonce IN (SELECT nonce FROM keyed)
    RETURNING id, status, run_at, created_at, queue
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT i.id, now(), NULL, i.status, 0,
           CASE WHEN x.trace IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('trace', x.trace) END
    FROM inserted AS i JOIN input AS x ON x.id = i.id
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
                             dependencies, idempotency_key, version)
    SELECT id, task, queue, coalesce(args, '[]'), coalesce(kwargs, '{}'),
           CASE WHEN due > now() THEN 'scheduled' ELSE 'queued' END,
           coalesce(priority, 0), due, 0, max_attempts, owner, now(), now(), stage,
           coalesce(%(dependencies)s::jsonb, '[]'), NULL, 1
    FROM (SELECT *, coalesce(run_at, now() + make_interval(secs => coalesce(delay_s, 0))) AS due
          FROM jsonb_to_recordset(%(jobs)s) AS x(
              id uuid, task text, queue text, args jsonb, kwargs jsonb, priority smallint,
              max_attempts integer, owner text, run_at timestamptz, delay_s double precision,
              stage text)) AS rows
    RETURNING id, status, run_at, created_at, queue
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), NULL, status, 0, %(meta)s FROM inserted
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

-- name: job_insert
-- One job without a key (most single enqueues): jobs_insert's work with typed
-- parameters, so the server takes no JSON apart and plans no key step (a
-- third faster a call). An empty value comes as NULL: nothing to encode.
WITH inserted AS (
    INSERT INTO redrive_job (id, task, queue, args, kwargs, status, priority, run_at,
                             attempts, max_attempts, owner, created_at, updated_at, stage,
                             dependencies, idempotency_key, version)
    SELECT %(id)s, %(task)s, %(queue)s, coalesce(%(args)s::jsonb, '[]'), coalesce(%(kwargs)s::jsonb, '{}'),
           CASE WHEN due > now() THEN 'scheduled' ELSE 'queued' END,
           %(priority)s, due, 0, %(max_attempts)s, %(owner)s, now(), now(), %(stage)s,
           coalesce(%(dependencies)s::jsonb, '[]'), NULL, 1
    FROM (SELECT coalesce(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay_s)s)) AS due) AS d
    RETURNING id, status, run_at, created_at, queue
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), NULL, status, 0, coalesce(%(meta)s::jsonb, '{}') FROM inserted
), wake AS (
    SELECT pg_notify('redrive_jobs', queue) FROM inserted WHERE status = 'queued'
)
SELECT status, run_at, created_at, (SELECT count(*) FROM wake) AS woken FROM inserted;

-- name: job_keys_get
-- The runs that keys point at, with what the key row remembers of them.
SELECT k.version AS key_version, k.fingerprint AS key_fingerprint, k.key AS key_name,
       k.task AS key_task, k.owner AS key_owner, j.*
FROM redrive_job_key AS k
JOIN (SELECT * FROM redrive_job UNION ALL SELECT * FROM redrive_job_done) AS j ON j.id = k.job_id
WHERE (k.task, k.owner, k.key) IN (
    SELECT * FROM jsonb_to_recordset(%(keys)s) AS x(task text, owner text, key text));

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

-- name: _cascade
-- What goes with the finished jobs a statement deletes (its "jobs" step):
-- their events, letters, keys, cancel requests and permits.
events AS (
    DELETE FROM redrive_job_event AS e USING jobs WHERE e.job_id = jobs.id
), letters AS (
    DELETE FROM redrive_dead_letter AS l USING jobs WHERE l.job_id = jobs.id
), keys AS (
    DELETE FROM redrive_job_key AS k USING jobs WHERE k.job_id = jobs.id
), requests AS (
    DELETE FROM redrive_cancel_request AS c USING jobs WHERE c.job_id = jobs.id
), permits AS (
    DELETE FROM redrive_permit AS p USING jobs WHERE p.job_id = jobs.id
)

-- name: jobs_prune
-- Oldest history first, a batch at a time. A job whose dead letter is still
-- open waits for an operator; its letters and events go with it otherwise.
WITH doomed AS (
    SELECT d.id FROM redrive_job_done AS d
    WHERE d.finished_at < now() - %(older_than)s
      AND NOT EXISTS (SELECT 1 FROM redrive_dead_letter AS l
                      WHERE l.job_id = d.id AND l.replayed_at IS NULL AND l.resolved_at IS NULL)
    ORDER BY d.finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), jobs AS (
    DELETE FROM redrive_job_done AS d USING doomed WHERE d.id = doomed.id RETURNING d.id
), {_cascade}
SELECT count(*) AS pruned FROM jobs;

-- name: jobs_delete
-- Finished jobs an operator picked, with what a prune takes with them.
WITH jobs AS (
    DELETE FROM redrive_job_done AS d WHERE d.id = ANY(%(ids)s::uuid[]) RETURNING d.id
), {_cascade}
SELECT id FROM jobs;

-- name: schema_present
-- Whether a connection of the caller's is to a database redrive uses.
SELECT to_regclass('redrive_job') IS NOT NULL AS present;

-- name: lease_lock
SELECT 1 AS held FROM redrive_job WHERE id = %(id)s AND lease_token = %(token)s AND lease_expires_at > now() FOR SHARE;

-- name: leases_extend
UPDATE redrive_job AS j
SET lease_expires_at = now() + %(lease_ttl)s
FROM unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS l(id, token)
WHERE j.id = l.id AND j.lease_token = l.token AND j.lease_expires_at > now()
RETURNING j.id, j.lease_token;

-- name: jobs_finish
-- Every kind of ending a batch holds, in one statement (core/transitions.py):
-- complete, fail and cancel move the job to history, retry and requeue put it
-- back on the queue; each is fenced on its lease. A retry of a job whose
-- cancel was asked while it ran ends it cancelled instead, the attempt's error
-- kept. A failure writes its dead letter, escalated when the job's previous
-- letter was replayed and this is the same non-retryable error_class (the
-- mirror of core/dead_letters.py's escalates). The rows answered say what was
-- written, each with the place (n) of its item in :items, a JSON array of
-- {n, kind, id, token, meta, result, error, delay_s, by, refund, reclaim, dur_b, wait_b}: a key left
-- out reads as NULL, and a retry's or a failure's details are one object,
-- ``error`` {code, message, class, retryable, stage, stage_attempts, stack,
-- context}, read only by the rows that have one (a batch is mostly successes).
WITH asked AS (
    SELECT i.*,
        CASE WHEN c.by IS NOT NULL THEN 'cancel' ELSE i.kind END AS ends,
        CASE i.kind WHEN 'cancel' THEN i.by ELSE c.by END AS cancelled_by
    FROM jsonb_to_recordset(%(items)s) AS i(
        n int, kind text, id uuid, token uuid, meta jsonb, result jsonb, error jsonb,
        delay_s double precision, by text, refund int, reclaim boolean, dur_b int, wait_b int)
    -- only a retry looks for a cancel request
    LEFT JOIN redrive_cancel_request AS c ON i.kind = 'retry' AND c.job_id = i.id
), moved AS (
    DELETE FROM redrive_job AS j USING asked AS i
    WHERE j.id = i.id AND j.lease_token = i.token AND (j.lease_expires_at > now() OR i.reclaim) AND i.ends IN ('complete', 'fail', 'cancel')
    RETURNING j.*, i.n, i.kind, i.ends, i.cancelled_by, i.result AS new_result, i.meta AS event_meta,
        i.error AS failure, coalesce(i.error->>'stage', j.stage) AS new_stage, i.dur_b, i.wait_b,
        CASE i.ends WHEN 'complete' THEN 'succeeded' WHEN 'fail' THEN 'failed' ELSE 'cancelled' END AS new_status
), done AS (
    INSERT INTO redrive_job_done (id, task, queue, args, kwargs, status, priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        error_code, error_message, result, created_at, updated_at, started_at, finished_at, failed_at,
        stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
        idempotency_key, version)
    SELECT id, task, queue, args, kwargs, new_status, priority, run_at,
        attempts, max_attempts, owner,
        coalesce(failure->>'code', last_error_code), coalesce(failure->>'message', last_error_message),
        CASE WHEN kind = 'fail' THEN failure->>'code' END, CASE WHEN kind = 'fail' THEN failure->>'message' END,
        new_result, created_at, now(), started_at, now(), CASE WHEN kind = 'fail' THEN now() END,
        new_stage, coalesce(failure->'stage_attempts', stage_attempts), checkpoint, manual_retry_count,
        CASE WHEN failure IS NULL THEN first_failed_at ELSE coalesce(first_failed_at, now()) END,
        dependencies, idempotency_key, version
    FROM moved
), previous AS (
    SELECT DISTINCT ON (d.job_id) d.job_id, d.id, d.error_class, d.replayed_at
    FROM redrive_dead_letter AS d JOIN moved AS m ON d.job_id = m.id AND m.ends = 'fail'
    ORDER BY d.job_id, d.id DESC
), letters AS (
    INSERT INTO redrive_dead_letter (job_id, task, queue, owner, error_class, error_code,
        error_message, retryable, stage, stage_attempts, attempts, last_stack, context,
        first_failure_at, last_failure_at, escalated, previous_id)
    SELECT m.id, m.task, m.queue, m.owner, m.failure->>'class', m.failure->>'code',
        m.failure->>'message', (m.failure->>'retryable')::boolean, m.new_stage,
        coalesce(m.failure->'stage_attempts', m.stage_attempts), m.attempts,
        m.failure->>'stack', coalesce(m.failure->'context', '{}'), coalesce(m.first_failed_at, now()), now(),
        coalesce(p.replayed_at IS NOT NULL AND p.error_class = m.failure->>'class'
                 AND NOT (m.failure->>'retryable')::boolean, false),
        p.id
    FROM moved AS m LEFT JOIN previous AS p ON p.job_id = m.id
    WHERE m.ends = 'fail'
    RETURNING id, job_id, escalated
), taken AS (
    -- the request a cancel answered (a failure leaves it; a revive drops it)
    DELETE FROM redrive_cancel_request AS c USING moved AS m WHERE c.job_id = m.id AND m.ends = 'cancel'
), retried AS (
    UPDATE redrive_job AS j
    SET status = 'queued',
        run_at = now() + make_interval(secs => coalesce(i.delay_s, 0)),
        attempts = j.attempts - coalesce(i.refund, 0),
        lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
        last_error_code = coalesce(i.error->>'code', j.last_error_code),
        last_error_message = coalesce(i.error->>'message', j.last_error_message),
        stage = coalesce(i.error->>'stage', j.stage),
        stage_attempts = coalesce(i.error->'stage_attempts', j.stage_attempts),
        first_failed_at = CASE WHEN i.error IS NULL THEN j.first_failed_at
                               ELSE coalesce(j.first_failed_at, now()) END,
        updated_at = now()
    FROM asked AS i
    WHERE j.id = i.id AND j.lease_token = i.token AND (j.lease_expires_at > now() OR i.reclaim) AND i.ends IN ('retry', 'requeue')
    RETURNING j.id, i.n, i.kind, j.task, j.queue, j.attempts, j.stage,
        coalesce(i.refund, 0) AS refund, i.error->>'code' AS error_code, i.delay_s, i.meta, i.dur_b, i.wait_b
), rolled AS (
    -- core/rollups.py: each ending, and its run's wait, added to its minute's
    -- rollup on this connection's shard (no two workers wait on one row)
    INSERT INTO redrive_rollup AS r (at, queue, task, shard, kind, bucket, n)
    SELECT floor(extract(epoch FROM now()))::bigint / 60 * 60, e.queue, e.task, pg_backend_pid() %% 4,
        v.kind, v.bucket, count(*)
    FROM (
        SELECT queue, task, new_status AS kind, dur_b, wait_b FROM moved
        UNION ALL
        -- a requeue spent its attempt only when a crashed worker's lease was taken back
        SELECT queue, task, 'retried', dur_b, wait_b FROM retried WHERE kind = 'retry' OR refund = 0
    ) AS e
    CROSS JOIN LATERAL (VALUES (e.kind, e.dur_b), ('wait', e.wait_b)) AS v(kind, bucket)
    WHERE v.bucket IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5, 6
    ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (at, queue, task, shard, kind, bucket) DO UPDATE SET n = r.n + excluded.n
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT m.id, now(), 'running', m.new_status, m.attempts,
        CASE m.ends
            WHEN 'complete' THEN m.event_meta
            WHEN 'fail' THEN jsonb_build_object('error_code', m.failure->>'code', 'error_class', m.failure->>'class',
                                                'stage', m.new_stage, 'dead_letter_id', l.id,
                                                'escalated', l.escalated) || m.event_meta
            ELSE CASE WHEN m.kind = 'retry'
                      THEN jsonb_build_object('error_code', m.failure->>'code', 'stage', m.new_stage)
                      ELSE '{}'::jsonb END
                 || m.event_meta || jsonb_build_object('by', m.cancelled_by)
        END
    FROM moved AS m LEFT JOIN letters AS l ON l.job_id = m.id
    UNION ALL
    SELECT r.id, now(), 'running', 'queued', r.attempts,
        CASE WHEN r.kind = 'retry'
             THEN jsonb_build_object('error_code', r.error_code, 'delay_ms', round(r.delay_s * 1000),
                                     'stage', r.stage) || r.meta
             ELSE r.meta END
    FROM retried AS r
), told AS (
    -- only for jobs someone awaits (migration 0014): no NOTIFY otherwise
    SELECT pg_notify('redrive_done', m.id::text) FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM redrive_result_waiter AS w WHERE w.job_id = m.id)
), wake AS (
    SELECT pg_notify('redrive_jobs', queue) FROM (SELECT DISTINCT queue FROM retried WHERE kind = 'requeue') AS q
)
SELECT m.n, m.task, m.queue, m.new_status AS status, m.attempts AS attempt, m.new_stage AS stage,
    l.id AS dead_letter_id, coalesce(l.escalated, false) AS escalated, m.cancelled_by,
    (SELECT count(*) FROM told) + (SELECT count(*) FROM wake) AS signals
FROM moved AS m LEFT JOIN letters AS l ON l.job_id = m.id
UNION ALL
SELECT r.n, r.task, r.queue, 'queued', r.attempts + r.refund, r.stage, NULL, false, NULL, 0
FROM retried AS r
ORDER BY 1;

-- name: jobs_complete
-- jobs_finish for a batch of successes only, the most common batch: the same
-- items, writes and answer as jobs_finish's success branch, without the
-- branches for the other kinds. PostgreSQL sets up every part of a statement
-- each time it runs it, so those cost a third of the write of a batch of one.
WITH moved AS (
    DELETE FROM redrive_job AS j
    USING jsonb_to_recordset(%(items)s) AS i(
        n int, kind text, id uuid, token uuid, meta jsonb, result jsonb, reclaim boolean, dur_b int, wait_b int)
    -- i.kind: every item is a success; the test also tells the planner that few items
    -- pass, so that it searches the primary key for each, as jobs_finish does
    WHERE i.kind = 'complete' AND j.id = i.id AND j.lease_token = i.token
      AND (j.lease_expires_at > now() OR i.reclaim)
    RETURNING j.id, j.task, j.queue, j.args, j.kwargs, j.priority, j.run_at, j.attempts, j.max_attempts, j.owner,
        j.last_error_code, j.last_error_message, j.created_at, j.started_at, j.stage, j.stage_attempts,
        j.checkpoint, j.manual_retry_count, j.first_failed_at, j.dependencies, j.idempotency_key, j.version,
        i.n, i.result, i.meta, i.dur_b, i.wait_b
), done AS (
    INSERT INTO redrive_job_done (id, task, queue, args, kwargs, status, priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        result, created_at, updated_at, started_at, finished_at,
        stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
        idempotency_key, version)
    SELECT id, task, queue, args, kwargs, 'succeeded', priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        result, created_at, now(), started_at, now(),
        stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
        idempotency_key, version
    FROM moved
), rolled AS (
    INSERT INTO redrive_rollup AS r (at, queue, task, shard, kind, bucket, n)
    SELECT floor(extract(epoch FROM now()))::bigint / 60 * 60, m.queue, m.task, pg_backend_pid() %% 4,
        v.kind, v.bucket, count(*)
    FROM moved AS m
    CROSS JOIN LATERAL (VALUES ('succeeded', m.dur_b), ('wait', m.wait_b)) AS v(kind, bucket)
    WHERE v.bucket IS NOT NULL
    GROUP BY 1, 2, 3, 4, 5, 6
    ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (at, queue, task, shard, kind, bucket) DO UPDATE SET n = r.n + excluded.n
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), 'running', 'succeeded', attempts, meta FROM moved
), told AS (
    SELECT pg_notify('redrive_done', m.id::text) FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM redrive_result_waiter AS w WHERE w.job_id = m.id)
)
SELECT n, task, queue, 'succeeded' AS status, attempts AS attempt, stage,
    NULL::bigint AS dead_letter_id, false AS escalated, NULL::text AS cancelled_by,
    (SELECT count(*) FROM told) AS signals
FROM moved ORDER BY 1;

-- name: jobs_expired
-- Running jobs whose lease expired; the store ends each with jobs_finish
-- (fenced: two reclaimers at once end each job once).
SELECT id, lease_token, lease_owner, attempts, max_attempts
FROM redrive_job
WHERE status = 'running' AND lease_expires_at <= now()
ORDER BY lease_expires_at
LIMIT %(limit)s;

-- name: jobs_cancel
-- Each waiting job of :ids ends now; a running one gets a request its worker
-- acts on (the first asker's is kept). Answers each as it now is: the
-- cancelled as they went to history, the running as they run; a job not
-- there or ended is not in the answer.
WITH moved AS (
    DELETE FROM redrive_job
    WHERE id = ANY(%(ids)s::uuid[]) AND status IN ('scheduled', 'queued')
    RETURNING *
), requested AS (
    INSERT INTO redrive_cancel_request (job_id, by, at)
    SELECT id, %(by)s, now() FROM redrive_job WHERE id = ANY(%(ids)s::uuid[]) AND status = 'running'
    ON CONFLICT (job_id) DO NOTHING
), taken AS (
    -- a request left from the run that just ended (see jobs_finish)
    DELETE FROM redrive_cancel_request AS c USING moved AS m WHERE c.job_id = m.id
), done AS (
    INSERT INTO redrive_job_done (id, task, queue, args, kwargs, status, priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        created_at, updated_at, started_at, finished_at,
        stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
        idempotency_key, version)
    SELECT id, task, queue, args, kwargs, 'cancelled', priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        created_at, now(), started_at, now(),
        stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
        idempotency_key, version
    FROM moved
    RETURNING *
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), status, 'cancelled', attempts, jsonb_build_object('by', %(by)s::text) FROM moved
), told AS (
    SELECT pg_notify('redrive_done', m.id::text) FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM redrive_result_waiter AS w WHERE w.job_id = m.id)
)
-- (told is read, or PostgreSQL would not run it: only CTEs that write always run)
SELECT * FROM done WHERE (SELECT count(*) FROM told) >= 0
UNION ALL
SELECT * FROM redrive_job WHERE id = ANY(%(ids)s::uuid[]) AND status = 'running';

-- name: control_read
SELECT 'cancel' AS kind, job_id::text AS name, by FROM redrive_cancel_request
WHERE job_id = ANY(%(ids)s::uuid[])
UNION ALL
SELECT 'pause', queue, by FROM redrive_queue_pause;

-- name: queue_pause
INSERT INTO redrive_queue_pause (queue, by, at) VALUES (%(queue)s, %(by)s, now())
ON CONFLICT (queue) DO NOTHING RETURNING queue;

-- name: queue_resume
WITH resumed AS (
    DELETE FROM redrive_queue_pause WHERE queue = %(queue)s RETURNING queue
), wake AS (
    SELECT pg_notify('redrive_jobs', queue) FROM resumed
)
SELECT queue, (SELECT count(*) FROM wake) AS woken FROM resumed;

-- name: queues_waiting
-- The queues with waiting jobs, found by skipping through migration 0023's
-- index (a step per queue, never a step per job).
WITH RECURSIVE queues AS (
    (SELECT queue FROM redrive_job WHERE status IN ('scheduled', 'queued') ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM redrive_job AS j
            WHERE j.status IN ('scheduled', 'queued') AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
    FROM queues AS q WHERE q.queue IS NOT NULL
)
SELECT queue FROM queues WHERE queue IS NOT NULL;

-- name: queues_stats
-- Never every waiting job: per queue of :queues (queues_waiting) and waiting
-- state, its oldest entry in the index and a count that stops at :cap (the
-- store asks the planner beyond it: queue_estimate); running jobs exactly,
-- from the running leases' index. The queues come as an array so the plan's
-- cost stays that of a few index probes (a recursive CTE here made it look
-- big enough to compile).
SELECT q.queue, s.status,
    -- in the index's order, so the planner walks the index (a scan of the table
    -- that stops at the cap would read all of it for an empty state)
    (SELECT count(*) FROM (SELECT FROM redrive_job AS j
                           WHERE j.queue = q.queue AND j.status = s.status AND j.status IN ('scheduled', 'queued')
                           ORDER BY j.run_at LIMIT %(cap)s) AS c) AS n,
    extract(epoch FROM now() - (SELECT j.run_at FROM redrive_job AS j
                                WHERE j.queue = q.queue AND j.status = s.status
                                  AND j.status IN ('scheduled', 'queued') AND j.run_at <= now()
                                ORDER BY j.run_at LIMIT 1))::float8 AS oldest_due_age_s,
    NULL::float8 AS oldest_running_age_s
FROM unnest(%(queues)s::text[]) AS q(queue) CROSS JOIN (VALUES ('scheduled'), ('queued')) AS s(status)
UNION ALL
SELECT queue, 'running', count(*), NULL, extract(epoch FROM now() - min(started_at))::float8
FROM redrive_job
WHERE status = 'running'
GROUP BY queue
ORDER BY 1, 2;

-- name: queue_estimate
-- The planner's row estimate for one queue's jobs in one state (FORMAT JSON).
EXPLAIN (FORMAT JSON) SELECT FROM redrive_job WHERE queue = %(queue)s AND status = %(status)s;

-- name: queues_estimate
-- What the store knows of the waiting counts past the exact ones, for every
-- queue at once: the table's live rows, as PostgreSQL keeps their count at
-- each commit (no ANALYZE needed; a backend reports its changes within a
-- second of going idle, or ten after a burst); and how the planner reckons
-- they share out, from the joint statistics' most common (queue, state)
-- pairs (migration 0023; null pairs: never analyzed) and the table's rows now
-- (rows per page at the last ANALYZE times its pages now).
SELECT s.most_common_vals AS pairs, s.most_common_freqs AS freqs,
    CASE WHEN c.relpages > 0
         THEN c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::float8)
    END AS rows,
    pg_stat_get_live_tuples(c.oid) AS live
FROM pg_class AS c
LEFT JOIN pg_stats_ext AS s ON s.statistics_name = 'redrive_job_queue_status'
    AND s.schemaname = c.relnamespace::regnamespace::text
WHERE c.oid = 'redrive_job'::regclass;

-- name: queues_count
-- The waiting jobs of each (:queues[i], :statuses[i]), counted in the waiting
-- jobs' index up to :cap: the estimate's exact floor where a share looks small.
SELECT p.queue, p.status,
    (SELECT count(*) FROM (SELECT FROM redrive_job AS j
                           WHERE j.queue = p.queue AND j.status = p.status AND j.status IN ('scheduled', 'queued')
                           ORDER BY j.run_at LIMIT %(cap)s) AS c) AS n
FROM unnest(%(queues)s::text[], %(statuses)s::text[]) AS p(queue, status);

-- name: runs_ended
SELECT d.finished_at AS at, d.task, d.status = 'failed' AS failed,
    (SELECT (e.meta->>'duration_ms')::double precision / 1000 FROM redrive_job_event AS e
     WHERE e.job_id = d.id ORDER BY e.id DESC LIMIT 1) AS duration_s
FROM redrive_job_done AS d
WHERE d.finished_at >= %(since)s AND d.status IN ('succeeded', 'failed')
ORDER BY d.finished_at DESC
LIMIT %(limit)s;

-- name: alert_fire
INSERT INTO redrive_alert (rule, incident, detail, fired_at)
VALUES (%(rule)s, %(incident)s, %(detail)s, now())
ON CONFLICT (rule) DO NOTHING
RETURNING rule;

-- name: alert_resolve
DELETE FROM redrive_alert WHERE rule = %(rule)s AND incident = %(incident)s RETURNING rule;

-- name: stages_save
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(items)s) AS x(
        id uuid, token uuid, stage text, output jsonb, stage_attempts jsonb, next_stage text)
)
UPDATE redrive_job AS j
SET checkpoint = j.checkpoint || jsonb_build_object(i.stage, i.output),
    stage_attempts = i.stage_attempts,
    stage = coalesce(i.next_stage, i.stage),
    updated_at = now()
FROM input AS i
WHERE j.id = i.id AND j.lease_token = i.token AND j.lease_expires_at > now()
RETURNING j.id, j.lease_token;

-- name: jobs_revive
-- failed -> queued for each job of :revivals as its revive plan
-- (core/dead_letters.py) says, only while the job is still the failure the
-- plan was made from; with a dead_letter_id, only while that letter is still
-- open, so two operators replaying at once revive the job once.
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(revivals)s) AS x(
        id uuid, failed_at timestamptz, dead_letter_id bigint, by text, replay_from text, stage text,
        stage_attempts jsonb, keep_checkpoint boolean, manual_retries integer, meta jsonb)
), moved AS (
    DELETE FROM redrive_job_done AS d
    USING input AS i
    WHERE d.id = i.id AND d.status = 'failed' AND d.failed_at = i.failed_at
      AND (i.dead_letter_id IS NULL OR EXISTS (
            SELECT 1 FROM redrive_dead_letter AS l
            WHERE l.id = i.dead_letter_id AND l.job_id = d.id
              AND l.replayed_at IS NULL AND l.resolved_at IS NULL))
    RETURNING d.*
), revived AS (
    INSERT INTO redrive_job (id, task, queue, args, kwargs, status, priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        created_at, updated_at, started_at,
        stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
        idempotency_key, version)
    SELECT m.id, m.task, m.queue, m.args, m.kwargs, 'queued', m.priority, now(),
        0, m.max_attempts, m.owner, m.last_error_code, m.last_error_message,
        m.created_at, now(), m.started_at,
        i.stage, i.stage_attempts,
        CASE WHEN i.keep_checkpoint THEN m.checkpoint ELSE '{}'::jsonb END,
        i.manual_retries, NULL, m.dependencies, m.idempotency_key, m.version
    FROM moved AS m JOIN input AS i ON i.id = m.id
    RETURNING *
), letters AS (
    UPDATE redrive_dead_letter AS l
    SET replayed_at = now(), replayed_by = i.by, replay_from = i.replay_from
    FROM input AS i
    WHERE l.job_id = i.id AND l.job_id IN (SELECT id FROM revived)
      AND l.replayed_at IS NULL AND l.resolved_at IS NULL
    RETURNING l.id, l.job_id
), requests AS (
    -- a cancel asked of the run that failed does not reach the new one
    DELETE FROM redrive_cancel_request AS c USING revived AS r WHERE c.job_id = r.id
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT r.id, now(), 'failed', 'queued', 0,
           i.meta || jsonb_build_object('dead_letter_ids', (
               SELECT coalesce(jsonb_agg(l.id ORDER BY l.id), '[]') FROM letters AS l WHERE l.job_id = r.id))
    FROM revived AS r JOIN input AS i ON i.id = r.id
), wake AS (
    SELECT pg_notify('redrive_jobs', queue) FROM (SELECT DISTINCT queue FROM revived) AS due_queues
)
SELECT revived.*, (SELECT count(*) FROM wake) AS woken FROM revived;

-- name: dead_letters_resolve
UPDATE redrive_dead_letter
SET resolved_at = now(), resolved_by = %(by)s,
    notes = CASE WHEN %(note)s::text IS NULL THEN notes
                 ELSE notes || jsonb_build_array(jsonb_build_object(
                     'at', now(), 'by', %(by)s::text, 'text', %(note)s::text)) END
WHERE id = ANY(%(ids)s::bigint[]) AND replayed_at IS NULL AND resolved_at IS NULL
RETURNING *;

-- name: dead_letter_note
UPDATE redrive_dead_letter
SET notes = notes || jsonb_build_array(jsonb_build_object(
    'at', now(), 'by', %(by)s::text, 'text', %(text)s::text))
WHERE id = %(id)s
RETURNING *;

-- name: breaker_lock
INSERT INTO redrive_breaker (name, state, data, updated_at)
VALUES (%(name)s, 'closed', %(initial)s, now())
ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
RETURNING data, extract(epoch FROM now())::float8 AS now;

-- name: breaker_save
UPDATE redrive_breaker SET state = %(state)s, data = %(data)s, updated_at = now()
WHERE name = %(name)s;

-- name: breaker_event_insert
INSERT INTO redrive_breaker_event (name, at, from_state, to_state, reason, by)
VALUES (%(name)s, now(), %(from_state)s, %(to_state)s, %(reason)s, %(by)s);

-- name: breakers_list
SELECT name, data, extract(epoch FROM now())::float8 AS now FROM redrive_breaker ORDER BY name;

-- name: outbox_open
-- Creates the row if it is new and returns it, fenced on the job's lease. The
-- no-op update makes a row another job just committed come back too.
WITH fence AS (
    SELECT id FROM redrive_job WHERE id = %(id)s AND lease_token = %(token)s AND lease_expires_at > now() FOR SHARE
)
INSERT INTO redrive_outbox AS o (key, token, status, job_id, created_at, updated_at)
SELECT %(key)s, %(outbox_token)s, 'pending', id, now(), now() FROM fence
ON CONFLICT (key) DO UPDATE SET updated_at = o.updated_at
RETURNING o.*;

-- name: outbox_update
WITH fence AS (
    SELECT id FROM redrive_job WHERE id = %(id)s AND lease_token = %(token)s AND lease_expires_at > now() FOR SHARE
)
UPDATE redrive_outbox AS o
SET status = %(status)s,
    provider_id = CASE WHEN %(provider_id)s::text = '' THEN NULL
                       ELSE coalesce(%(provider_id)s::text, o.provider_id) END,
    notified_at = CASE WHEN %(notified)s::boolean THEN now()
                       WHEN NOT %(notified)s::boolean THEN NULL
                       ELSE o.notified_at END,
    error_code = %(error_code)s, error_message = %(error_message)s,
    sends = o.sends + %(send_started)s::int, reconciliations = o.reconciliations + %(reconciled)s::int,
    job_id = %(id)s, updated_at = now()
FROM fence
WHERE o.key = %(key)s
RETURNING o.*;

-- name: outbox_page
SELECT * FROM redrive_outbox
WHERE (%(status)s::text IS NULL OR status = %(status)s) AND (%(job_id)s::uuid IS NULL OR job_id = %(job_id)s)
  AND (%(after_at)s::timestamptz IS NULL OR (created_at, key) > (%(after_at)s::timestamptz, %(after_key)s::text))
ORDER BY created_at, key
LIMIT %(limit)s;

-- name: schedule_checkpoint
WITH created AS (
    INSERT INTO redrive_schedule (name, fired_until, updated_at) VALUES (%(name)s, %(now)s, now())
    ON CONFLICT (name) DO NOTHING
    RETURNING fired_until
)
SELECT fired_until FROM created
UNION ALL
SELECT fired_until FROM redrive_schedule WHERE name = %(name)s AND NOT EXISTS (SELECT 1 FROM created);

-- name: schedule_advance
UPDATE redrive_schedule SET fired_until = greatest(fired_until, %(to)s), updated_at = now()
WHERE name = %(name)s;

-- name: audit_record
INSERT INTO redrive_audit (at, by, action, job_id, detail)
VALUES (now(), %(by)s, %(action)s, %(job_id)s, %(detail)s)
RETURNING id, at, by, action, job_id, detail;

-- name: worker_report
WITH forgotten AS (
    DELETE FROM redrive_worker
    WHERE heartbeat_at < now() - make_interval(secs => %(forget_after_s)s) AND id <> %(id)s
)
INSERT INTO redrive_worker (id, host, pid, queues, concurrency, version, running, detail, started_at,
                            heartbeat_at)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s, %(concurrency)s, %(version)s, %(running)s, %(detail)s, now(), now())
ON CONFLICT (id) DO UPDATE SET running = excluded.running, detail = excluded.detail,
    heartbeat_at = excluded.heartbeat_at;

-- name: worker_remove
DELETE FROM redrive_worker WHERE id = %(id)s;

-- name: session_open
-- Sessions past their time go as a new one comes: the table stays small.
WITH gone AS (DELETE FROM redrive_session WHERE expires_at < now())
INSERT INTO redrive_session (id, principal, expires_at)
VALUES (%(id)s, %(principal)s, now() + %(ttl)s::interval);

-- name: session_read
SELECT principal FROM redrive_session WHERE id = %(id)s AND expires_at > now();

-- name: session_close
DELETE FROM redrive_session WHERE id = %(id)s;

-- name: schedule_pause
-- A schedule not seen yet is created paused, at the given time: nothing before it is caught up.
INSERT INTO redrive_schedule (name, fired_until, updated_at, paused_by) VALUES (%(name)s, %(now)s, now(), %(by)s)
ON CONFLICT (name) DO UPDATE SET paused_by = excluded.paused_by, updated_at = now()
WHERE redrive_schedule.paused_by IS NULL
RETURNING name;

-- name: schedule_resume
UPDATE redrive_schedule SET paused_by = NULL, updated_at = now()
WHERE name = %(name)s AND paused_by IS NOT NULL
RETURNING name;

-- name: rollups_fold
-- Rows older than :before become rows :grain_s wide on shard 0, added to
-- what such a row holds already. The DELETE feeds the INSERT, so two folds at
-- once move each row once (the second waits, then finds it gone) and an
-- ending added to a row meanwhile moves with it.
WITH moved AS (
    DELETE FROM redrive_rollup
    WHERE at < %(before)s AND (shard <> 0 OR at %% %(grain_s)s <> 0)
    RETURNING at / %(grain_s)s * %(grain_s)s AS at, queue, task, kind, bucket, n
)
INSERT INTO redrive_rollup AS r (at, queue, task, shard, kind, bucket, n)
SELECT at, queue, task, 0, kind, bucket, sum(n) FROM moved
GROUP BY at, queue, task, kind, bucket
ORDER BY at, queue, task, kind, bucket
ON CONFLICT (at, queue, task, shard, kind, bucket) DO UPDATE SET n = r.n + excluded.n;
