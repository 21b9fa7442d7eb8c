-- Every state change of a job after its enqueue: the endings a worker or
-- the reclaim writes, stages saved, cancels and revivals.

-- name: _implied_columns
-- What a job's history row keeps of the events its row implied (migration 0032):
implied_enqueued, implied_started, ran_by

-- name: _implied_values
-- ... read from the live row it was
implied_enqueued, implied_started, {_ran_by}

-- name: _ran_by
-- The worker of an implied first start: its lease's while that run holds it.
CASE WHEN implied_started IS NOT NULL THEN coalesce(ran_by, lease_owner) END

-- name: jobs_expired
-- Running jobs whose lease expired; the store ends each with jobs_finish
-- (fenced: two reclaimers at once end each job once). Read through the
-- running jobs' index (migration 0038): the lease's expiry is in no index,
-- so that a heartbeat's extension is a HOT update.
SELECT id, lease_token, lease_owner, attempts, max_attempts
FROM redrive_job
WHERE status = 'running' AND lease_expires_at <= now()
ORDER BY lease_expires_at
LIMIT %(limit)s;

-- name: jobs_finish
-- Every kind of ending a batch holds, in one statement (core/transitions.py):
-- complete, fail and cancel move the job to history, retry and requeue put it
-- back on the queue; each is fenced on its lease. The successes are written
-- here; the other kinds, :others, by redrive_finish_others (migration 0034:
-- set up only when there are any, which in most batches there are not).
-- What follows the endings (the rollups, whoever awaits them, the workflow
-- steps after them) is jobs_ended, next in the same transaction.
-- The successes come as their ids and lease tokens (arrays, in binary) and
-- lists in text, a field each, in one order (codecs._successes;
-- redrive_successes, migration 0041, reads them as rows): :ns (each one's
-- place in the batch), :dur_ms and :wait_ms (its run's timings),
-- :reclaims ('t' for a reclaim's ending, or NULL for none), and :results
-- and :metas, JSON arrays, or NULL when all are empty. :others is
-- a JSON array of {n, kind, id, token, meta, error, delay_s, by, refund,
-- reclaim}: a key left out reads as NULL, and a retry's or a
-- failure's details are one object, ``error`` {code, message, class,
-- retryable, stage, stage_attempts, stack, context}. The rows answered say
-- what was written, each with its item's n, in no order.
WITH moved AS (
    {_successes_held}
    WHERE j.id = i.id AND j.lease_token = i.token AND {_lease_held}
{_successes_moved}

-- name: jobs_finish_at
-- jobs_finish for a batch whose successes' rows the store knows where to
-- find (:places, each one's ctid, in the successes' order): the rows its
-- claim (or a heartbeat since) left, each read there (a TID scan) instead of
-- through the primary key, which holds two entries for each running job
-- (the claim is not a HOT update): a fortieth of a job's work in the
-- database (bench/NOTES.md). A row that moved since (another update) is not
-- found there; the store ends those by id with jobs_finish, in the same
-- transaction. The places are read once (a subquery), not at each row.
WITH moved AS (
    {_successes_held}
    WHERE j.ctid = ((SELECT %(places)s::tid[]))[i.o] AND j.id = i.id AND j.lease_token = i.token
      AND {_lease_held}
{_successes_moved}

-- name: _successes_held
DELETE FROM redrive_job AS j
    USING redrive_successes(%(ids)b, %(tokens)b, %(ns)s, %(dur_ms)s, %(wait_ms)s) AS i

-- name: _lease_held
(j.lease_expires_at > now() OR (string_to_array(%(reclaims)s, ',')::boolean[])[i.o])

-- name: _successes_moved
-- The rest of jobs_finish and jobs_finish_at: the successes' history rows,
-- the other endings, and the answer.
    RETURNING j.id, j.task, j.queue, j.args, j.kwargs, j.priority, j.run_at, j.attempts, j.max_attempts, j.owner,
        j.last_error_code, j.last_error_message, j.created_at, j.started_at, j.stage, j.stage_attempts,
        j.checkpoint, j.manual_retry_count, j.first_failed_at, j.dependencies, j.idempotency_key, j.version,
        j.lease_owner, j.ran_by, j.implied_enqueued, j.implied_started,
        i.n, nullif(%(results)s::jsonb -> (i.o - 1), 'null') AS result, %(metas)s::jsonb -> (i.o - 1) AS meta,
        i.dur_ms, i.wait_ms
), done AS (
    INSERT INTO redrive_job_done (id, task, queue, args, kwargs, status, priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        result, created_at, updated_at, started_at, finished_at,
        stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
        idempotency_key, version, {_implied_columns}, implied_ended, ended_meta, ended_duration_ms, ended_wait_ms)
    SELECT id, task, queue, args, kwargs, 'succeeded', priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        -- updated_at NULL: the job has not changed since it ended (migration 0039)
        result, created_at, NULL, started_at, now(),
        stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
        idempotency_key, version, {_implied_values},
        -- a success's event is implied by the history row (migration 0032)
        -- its run's timings in columns of their own (migration 0037; the codec took them out of meta)
        nextval('redrive_job_event_id_seq'), nullif(meta, '{}'), dur_ms, wait_ms
    FROM moved
), others AS (
    SELECT * FROM redrive_finish_others(%(others)s, now())
)
SELECT n, task, queue, 'succeeded' AS status, attempts AS attempt, stage,
    NULL::bigint AS dead_letter_id, false AS escalated, NULL::text AS cancelled_by
FROM moved
UNION ALL
SELECT n, task, queue, status, attempt, stage, dead_letter_id, escalated, cancelled_by
FROM others;

-- name: _any_waiter
-- Whether anyone awaits any job at all, read once a batch: most batches
-- have no job awaited and none of a workflow, and then nothing is looked up
-- for each job (an eighth of an ending's work, bench/NOTES.md). Read at
-- the newest entry of the table's primary key (ids are UUIDv7): a scan
-- would go through every dead row a pruning leaves before vacuum, from the
-- first page, and so would the oldest entry.
(SELECT job_id FROM redrive_result_waiter ORDER BY job_id DESC LIMIT 1) IS NOT NULL

-- name: _any_step
-- Whether any job is a workflow's step, read as _any_waiter.
(SELECT job_id FROM redrive_step ORDER BY job_id DESC LIMIT 1) IS NOT NULL

-- name: jobs_ended
-- What follows a batch's endings, in their transaction, once jobs_finish
-- answered what it wrote: their tally added to the minute's rollups
-- (core/rollups.py: rollup_tally; :queues, :tasks, :kinds, :buckets, :ns), on
-- this connection's shard (no two workers wait on one row), its rows locked
-- in one order; each job that ended (:ids, :statuses; not a retry) told to
-- whoever awaits it (migration 0014: no NOTIFY otherwise), and the workflow
-- steps among them settled (migrations 0027, 0029: a plain job is none).
-- The rows workers share, a rollup's and a workflow's, are written only here,
-- in the statement that goes out with the COMMIT: no lock on them waits for
-- a round trip.
WITH rolled AS (
    INSERT INTO redrive_rollup AS r (at, queue, task, shard, kind, bucket, n)
    SELECT floor(extract(epoch FROM now()))::bigint / 60 * 60, t.queue, t.task, pg_backend_pid() %% 4,
        t.kind, t.bucket, t.n
    FROM unnest(%(queues)s::text[], %(tasks)s::text[], %(kinds)s::text[], %(buckets)s::int[], %(ns)s::int[])
        AS t(queue, task, kind, bucket, n)
    ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (at, queue, task, shard, kind, bucket) DO UPDATE SET n = r.n + excluded.n
), ended AS (
    SELECT id, status FROM redrive_ended(%(ids)b, %(statuses)s::text[])
), told AS (
    SELECT pg_notify('redrive_done', e.id::text) FROM ended AS e
    WHERE {_any_waiter} AND EXISTS (SELECT 1 FROM redrive_result_waiter AS w WHERE w.job_id = e.id)
), settled AS (
    SELECT redrive_settle(array_agg(e.id), array_agg(e.status)) AS changes FROM ended AS e
    WHERE {_any_step} AND EXISTS (SELECT 1 FROM redrive_step AS s WHERE s.job_id = e.id)
    HAVING count(*) > 0
)
-- (told and settled are read, or PostgreSQL would not run them: only parts that write always run)
SELECT (SELECT count(*) FROM told) AS signals, (SELECT changes FROM settled) AS workflows;

-- name: stages_save
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(items)s) AS x(
        id uuid, token uuid, stage text, output jsonb, stage_attempts jsonb, next_stage text)
)
UPDATE redrive_job AS j
SET checkpoint = coalesce(j.checkpoint, '{}') || jsonb_build_object(i.stage, i.output),
    stage_attempts = i.stage_attempts,
    stage = coalesce(i.next_stage, i.stage),
    updated_at = now()
FROM input AS i
WHERE j.id = i.id AND j.lease_token = i.token AND j.lease_expires_at > now()
RETURNING j.id, j.lease_token;

-- name: progress_save
INSERT INTO redrive_progress (job_id, at, value)
SELECT id, now(), %(value)s FROM redrive_job
WHERE id = %(id)s AND lease_token = %(token)s AND status = 'running' AND lease_expires_at > now()
ON CONFLICT (job_id) DO UPDATE SET at = excluded.at, value = excluded.value
RETURNING job_id;

-- name: jobs_cancel
-- Each waiting job of :ids ends now; a running one gets a request its worker
-- acts on (the first asker's is kept). Answers each as it now is: the
-- cancelled as they went to history, the running as they run; a job not
-- there or ended is not in the answer.
WITH moved AS (
    DELETE FROM redrive_job
    WHERE id = ANY(%(ids)s::uuid[]) AND status IN ('pending', 'blocked', 'scheduled', 'queued')
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
        idempotency_key, version, {_implied_columns})
    SELECT id, task, queue, args, kwargs, 'cancelled', priority, run_at,
        attempts, max_attempts, owner, last_error_code, last_error_message,
        created_at, now(), started_at, now(),
        stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
        idempotency_key, version, {_implied_values}
    FROM moved
    RETURNING *
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), status, 'cancelled', attempts, jsonb_build_object('by', %(by)s::text) FROM moved
), told AS (
    SELECT pg_notify('redrive_done', m.id::text) FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM redrive_result_waiter AS w WHERE w.job_id = m.id)
), settled AS (
    SELECT redrive_settle(array_agg(m.id), array_agg('cancelled'::text)) FROM moved AS m
    WHERE EXISTS (SELECT 1 FROM redrive_step AS s WHERE s.job_id = m.id) HAVING count(*) > 0
)
-- (told and settled are read, or PostgreSQL would not run them: only CTEs that write always run)
SELECT {_job_columns} FROM done WHERE (SELECT count(*) FROM told) + (SELECT count(*) FROM settled) >= 0
UNION ALL
SELECT {_job_columns} FROM redrive_job WHERE id = ANY(%(ids)s::uuid[]) AND status = 'running';

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
        idempotency_key, version, implied_enqueued, implied_started, ran_by)
    SELECT m.id, m.task, m.queue, m.args, m.kwargs, 'queued', m.priority, now(),
        0, m.max_attempts, m.owner, m.last_error_code, m.last_error_message,
        m.created_at, now(), m.started_at,
        i.stage, i.stage_attempts,
        CASE WHEN i.keep_checkpoint THEN m.checkpoint END,
        i.manual_retries, NULL, m.dependencies, m.idempotency_key, m.version,
        m.implied_enqueued, m.implied_started, m.ran_by
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
), unblocked AS (
    -- the workflow steps this job's failure held wait on it again (migration 0027)
    SELECT redrive_unblock(array_agg(r.id)) FROM revived AS r
    WHERE EXISTS (SELECT 1 FROM redrive_step AS s WHERE s.job_id = r.id) HAVING count(*) > 0
)
SELECT revived.*, (SELECT count(*) FROM wake) + (SELECT count(*) FROM unblocked) AS woken FROM revived;
