-- Every batch of endings is one statement, jobs_finish (sql/endings.sql). It
-- writes the successes itself and calls redrive_finish_others with the items
-- of the other kinds: a failure and its dead letter, a cancel, a retry, a
-- requeue.
-- PostgreSQL sets up every part of a statement each time it runs it, rows or
-- none: written inline, the parts only those kinds use made a batch of
-- successes, most batches, cost a third more. In a function they are set up
-- only when a batch holds one (what was measured: bench/NOTES.md).
--
-- ended_at is the statement's now() (a test's clock stands in for it).
-- Answers a row for each item it applied (n: its place in items) as the
-- statement answers it, and what its ending adds to the minute's rollup: roll
-- (NULL for nothing: a requeue that gave its attempt back), dur_b, wait_b.
-- A retry of a job whose cancel was asked while it ran ends it cancelled
-- instead, the attempt's error kept (core.transitions.ends_as, the rule the
-- other stores call). A failure writes its dead letter, escalated when the
-- job's previous letter was replayed and this is the same non-retryable
-- error_class (the mirror of core/dead_letters.py's escalates).
CREATE FUNCTION redrive_finish_others(items jsonb, ended_at timestamptz)
RETURNS TABLE (n int, id uuid, task text, queue text, status text, attempt int, stage text,
    dead_letter_id bigint, escalated boolean, cancelled_by text, roll text, dur_b int, wait_b int)
-- mostly none: planned as the default 1,000 rows, the steps of the batch's
-- jobs would be looked for by reading every step (a hash join)
ROWS 1
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    IF items = '[]' THEN
        RETURN;  -- a batch of successes: jobs_finish wrote them all
    END IF;
    RETURN QUERY
    WITH asked AS (
        SELECT i.*,
            CASE WHEN c.by IS NOT NULL THEN 'cancel' ELSE i.kind END AS ends,
            CASE i.kind WHEN 'cancel' THEN i.by ELSE c.by END AS cancelled_by
        FROM jsonb_to_recordset(items) AS i(
            n int, kind text, id uuid, token uuid, meta jsonb, result jsonb, error jsonb,
            delay_s double precision, by text, refund int, reclaim boolean, dur_b int, wait_b int)
        -- only a retry looks for a cancel request
        LEFT JOIN redrive_cancel_request AS c ON i.kind = 'retry' AND c.job_id = i.id
    ), moved AS (
        DELETE FROM redrive_job AS j USING asked AS i
        WHERE j.id = i.id AND j.lease_token = i.token AND (j.lease_expires_at > ended_at OR i.reclaim)
          AND i.ends IN ('fail', 'cancel')
        RETURNING j.*, i.n, i.kind, i.ends, i.cancelled_by, i.meta AS event_meta, i.error AS failure,
            coalesce(i.error->>'stage', j.stage) AS new_stage, i.dur_b, i.wait_b,
            CASE i.ends WHEN 'fail' THEN 'failed' ELSE 'cancelled' END AS new_status
    ), done AS (
        INSERT INTO redrive_job_done (id, task, queue, args, kwargs, status, priority, run_at,
            attempts, max_attempts, owner, last_error_code, last_error_message,
            error_code, error_message, created_at, updated_at, started_at, finished_at, failed_at,
            stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at, dependencies,
            idempotency_key, version, implied_enqueued, implied_started, ran_by)
        SELECT id, task, queue, args, kwargs, new_status, priority, run_at,
            attempts, max_attempts, owner,
            coalesce(failure->>'code', last_error_code), coalesce(failure->>'message', last_error_message),
            CASE WHEN kind = 'fail' THEN failure->>'code' END, CASE WHEN kind = 'fail' THEN failure->>'message' END,
            created_at, ended_at, started_at, ended_at, CASE WHEN kind = 'fail' THEN ended_at END,
            new_stage, coalesce(failure->'stage_attempts', stage_attempts), checkpoint, manual_retry_count,
            CASE WHEN failure IS NULL THEN first_failed_at ELSE coalesce(first_failed_at, ended_at) END,
            dependencies, idempotency_key, version, implied_enqueued, implied_started,
            CASE WHEN implied_started IS NOT NULL THEN coalesce(ran_by, lease_owner) END
        FROM moved
    ), letters AS (
        INSERT INTO redrive_dead_letter (job_id, task, queue, owner, error_class, error_code,
            error_message, retryable, stage, stage_attempts, attempts, last_stack, context,
            first_failure_at, last_failure_at, escalated, previous_id)
        SELECT m.id, m.task, m.queue, m.owner, m.failure->>'class', m.failure->>'code',
            m.failure->>'message', (m.failure->>'retryable')::boolean, m.new_stage,
            coalesce(m.failure->'stage_attempts', m.stage_attempts), m.attempts,
            m.failure->>'stack', coalesce(m.failure->'context', '{}'), coalesce(m.first_failed_at, ended_at), ended_at,
            coalesce(p.replayed_at IS NOT NULL AND p.error_class = m.failure->>'class'
                     AND NOT (m.failure->>'retryable')::boolean, false),
            p.id
        FROM moved AS m
        LEFT JOIN LATERAL (  -- the job's previous letter
            SELECT d.id, d.error_class, d.replayed_at FROM redrive_dead_letter AS d
            WHERE d.job_id = m.id ORDER BY d.id DESC LIMIT 1
        ) AS p ON true
        WHERE m.ends = 'fail'
        RETURNING id, job_id, escalated
    ), taken AS (
        -- the request a cancel answered (a failure leaves it; a revive drops it)
        DELETE FROM redrive_cancel_request AS c USING moved AS m WHERE c.job_id = m.id AND m.ends = 'cancel'
    ), retried AS (
        UPDATE redrive_job AS j
        SET status = 'queued',
            run_at = ended_at + make_interval(secs => coalesce(i.delay_s, 0)),
            attempts = j.attempts - coalesce(i.refund, 0),
            lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
            last_error_code = coalesce(i.error->>'code', j.last_error_code),
            last_error_message = coalesce(i.error->>'message', j.last_error_message),
            stage = coalesce(i.error->>'stage', j.stage),
            stage_attempts = coalesce(i.error->'stage_attempts', j.stage_attempts),
            first_failed_at = CASE WHEN i.error IS NULL THEN j.first_failed_at
                                   ELSE coalesce(j.first_failed_at, ended_at) END,
            -- the worker of an implied first start (migration 0032)
            ran_by = CASE WHEN j.implied_started IS NOT NULL THEN coalesce(j.ran_by, j.lease_owner) END,
            updated_at = ended_at
        FROM asked AS i
        WHERE j.id = i.id AND j.lease_token = i.token AND (j.lease_expires_at > ended_at OR i.reclaim)
          AND i.ends IN ('retry', 'requeue')
        RETURNING j.id, i.n, i.kind, j.task, j.queue, j.attempts, j.stage,
            coalesce(i.refund, 0) AS refund, i.error->>'code' AS error_code, i.delay_s, i.meta, i.dur_b, i.wait_b
    ), events AS (
        INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
        SELECT m.id, ended_at, 'running', m.new_status, m.attempts,
            CASE m.ends
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
        SELECT r.id, ended_at, 'running', 'queued', r.attempts,
            CASE WHEN r.kind = 'retry'
                 THEN jsonb_build_object('error_code', r.error_code, 'delay_ms', round(r.delay_s * 1000),
                                         'stage', r.stage) || r.meta
                 ELSE r.meta END
        FROM retried AS r
    ), wake AS (
        SELECT pg_notify('redrive_jobs', q.queue) FROM (SELECT DISTINCT queue FROM retried WHERE kind = 'requeue') AS q
    )
    SELECT m.n, m.id, m.task, m.queue, m.new_status, m.attempts, m.new_stage,
        l.id, coalesce(l.escalated, false), m.cancelled_by, m.new_status, m.dur_b, m.wait_b
    FROM moved AS m LEFT JOIN letters AS l ON l.job_id = m.id
    -- (wake is read, or PostgreSQL would not run it: only parts that write always run)
    WHERE (SELECT count(*) FROM wake) >= 0
    UNION ALL
    SELECT r.n, r.id, r.task, r.queue, 'queued', r.attempts + r.refund, r.stage, NULL, false, NULL,
        -- a requeue spent its attempt only when a crashed worker's lease was taken back
        CASE WHEN r.kind = 'retry' OR r.refund = 0 THEN 'retried' END, r.dur_b, r.wait_b
    FROM retried AS r
    WHERE (SELECT count(*) FROM wake) >= 0;
END
$$;
