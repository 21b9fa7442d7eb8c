-- A workflow's steps not yet ended, counted on its row, so the ending that
-- ends its last step knows it (and says so once: workflow.succeeded,
-- .failed, .cancelled), as the ending that blocks a step does
-- (workflow.blocked). Every step's final ending now passes through
-- redrive_settle (a step without children too), and a revival through
-- redrive_unblock. Workflow rows are locked before step rows, each in id
-- order, so two endings cannot deadlock.
ALTER TABLE redrive_workflow ADD COLUMN open_steps integer NOT NULL DEFAULT 0;
UPDATE redrive_workflow AS w SET open_steps = c.n
FROM (SELECT s.workflow_id, count(*) AS n FROM redrive_step AS s JOIN redrive_job AS j ON j.id = s.job_id
      GROUP BY 1) AS c
WHERE w.id = c.workflow_id;

DROP FUNCTION redrive_settle(uuid[], text[]);
-- The steps of ``ended`` (jobs that just reached a final ending, with their
-- statuses): their workflows' open counts, then the edges out of them (see
-- migration 0027). Answers what changed for a workflow: [{job, id, name,
-- became}] where became is succeeded, failed or cancelled (its last open step
-- ended) or blocked (a step of it was blocked); job is an ended job of it.
CREATE FUNCTION redrive_settle(ended uuid[], statuses text[]) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    kids uuid[];
    states text[];
    told jsonb;
    held jsonb;
    woken integer;
BEGIN
    PERFORM 1 FROM redrive_workflow
    WHERE id IN (SELECT s.workflow_id FROM redrive_step AS s WHERE s.job_id = ANY(ended))
    ORDER BY id FOR UPDATE;
    WITH mine AS (
        SELECT s.workflow_id, x.id, x.status
        FROM unnest(ended, statuses) AS x(id, status) JOIN redrive_step AS s ON s.job_id = x.id
    ), tally AS (
        SELECT workflow_id, count(*) AS n, (array_agg(id))[1] AS job,
               bool_or(status = 'failed') AS failed, bool_or(status = 'cancelled') AS cancelled
        FROM mine GROUP BY 1
    ), counted AS (
        UPDATE redrive_workflow AS w SET open_steps = w.open_steps - t.n
        FROM tally AS t WHERE w.id = t.workflow_id
        RETURNING w.id, w.name, w.open_steps, w.cancelled_at, t.job, t.failed, t.cancelled
    )
    -- a workflow whose last open step just ended: how it ended, from its steps
    -- (read once in its life; this statement's own endings come from ``statuses``)
    SELECT jsonb_agg(jsonb_build_object('job', c.job, 'id', c.id, 'name', c.name, 'became',
               CASE WHEN c.failed OR e.failed THEN 'failed'
                    WHEN c.cancelled_at IS NOT NULL OR c.cancelled OR e.cancelled THEN 'cancelled'
                    ELSE 'succeeded' END))
    INTO told
    FROM counted AS c
    CROSS JOIN LATERAL (
        SELECT coalesce(bool_or(j.status = 'failed'), false) AS failed,
               coalesce(bool_or(j.status = 'cancelled'), false) AS cancelled
        FROM redrive_step AS s JOIN redrive_job_done AS j ON j.id = s.job_id
        WHERE s.workflow_id = c.id
    ) AS e
    WHERE c.open_steps = 0;

    WITH resolved AS (
        UPDATE redrive_edge AS e
        SET state = CASE WHEN x.status = 'succeeded' OR e.policy = 'ended'
                              OR (x.status = 'cancelled' AND e.policy = 'not_failed')
                         THEN 'satisfied' ELSE 'blocking' END
        FROM unnest(ended, statuses) AS x(id, status)
        WHERE e.parent_id = x.id AND e.state = 'pending'
        RETURNING e.child_id, e.state
    )
    SELECT array_agg(child_id), array_agg(state) INTO kids, states FROM resolved;
    IF kids IS NULL THEN
        RETURN told;
    END IF;
    PERFORM 1 FROM redrive_step WHERE job_id = ANY(kids) ORDER BY job_id FOR UPDATE;
    WITH tally AS (
        SELECT k AS child_id, count(*) AS n, count(*) FILTER (WHERE st = 'blocking') AS blocked
        FROM unnest(kids, states) AS u(k, st) GROUP BY k
    ), counted AS (
        UPDATE redrive_step AS s SET waiting = s.waiting - t.n, blocking = s.blocking + t.blocked
        FROM tally AS t WHERE s.job_id = t.child_id
        RETURNING s.job_id, s.workflow_id, s.waiting, s.blocking
    ), moved AS (
        UPDATE redrive_job AS j
        SET status = CASE WHEN c.blocking > 0 THEN 'blocked' ELSE 'queued' END,
            run_at = CASE WHEN c.blocking > 0 THEN j.run_at ELSE now() END,
            updated_at = now()
        FROM counted AS c
        WHERE j.id = c.job_id AND j.status = 'pending' AND (c.blocking > 0 OR c.waiting = 0)
        RETURNING j.id, j.queue, j.status, j.attempts, c.workflow_id
    ), events AS (
        INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
        SELECT id, now(), 'pending', status, attempts, '{}'::jsonb FROM moved
    ), wake AS (
        SELECT pg_notify('redrive_jobs', queue) FROM (SELECT DISTINCT queue FROM moved WHERE status = 'queued') AS q
    ), blocked AS (
        SELECT m.workflow_id, count(*) AS n FROM moved AS m WHERE m.status = 'blocked' GROUP BY 1
    )
    -- one row, so wake is read (only CTEs that write run unread)
    SELECT (SELECT count(*) FROM wake),
           (SELECT jsonb_agg(jsonb_build_object('job', p.job, 'id', w.id, 'name', w.name, 'became', 'blocked',
                                                'blocked', b.n))
            FROM blocked AS b JOIN redrive_workflow AS w ON w.id = b.workflow_id
            CROSS JOIN LATERAL (SELECT (array_agg(x.id))[1] AS job FROM unnest(ended) AS x(id)
                                JOIN redrive_step AS s ON s.job_id = x.id WHERE s.workflow_id = w.id) AS p)
    INTO woken, held;
    RETURN CASE WHEN told IS NULL THEN held WHEN held IS NULL THEN told ELSE told || held END;
END
$$;

DROP FUNCTION redrive_unblock(uuid[]);
-- A failed step revived (a retry, a dead letter replayed): its workflow has
-- one more open step, and the edges it blocked wait on it again (migration 0027).
CREATE FUNCTION redrive_unblock(revived uuid[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    kids uuid[];
    changed integer;
BEGIN
    PERFORM 1 FROM redrive_workflow
    WHERE id IN (SELECT s.workflow_id FROM redrive_step AS s WHERE s.job_id = ANY(revived))
    ORDER BY id FOR UPDATE;
    UPDATE redrive_workflow AS w SET open_steps = w.open_steps + t.n
    FROM (SELECT s.workflow_id, count(*) AS n FROM redrive_step AS s WHERE s.job_id = ANY(revived) GROUP BY 1) AS t
    WHERE w.id = t.workflow_id;
    WITH reopened AS (
        UPDATE redrive_edge SET state = 'pending'
        WHERE parent_id = ANY(revived) AND state = 'blocking'
        RETURNING child_id
    )
    SELECT array_agg(child_id) INTO kids FROM reopened;
    IF kids IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM redrive_step WHERE job_id = ANY(kids) ORDER BY job_id FOR UPDATE;
    WITH tally AS (
        SELECT k AS child_id, count(*) AS n FROM unnest(kids) AS u(k) GROUP BY k
    ), counted AS (
        UPDATE redrive_step AS s SET waiting = s.waiting + t.n, blocking = s.blocking - t.n
        FROM tally AS t WHERE s.job_id = t.child_id
        RETURNING s.job_id, s.blocking
    ), moved AS (
        UPDATE redrive_job AS j SET status = 'pending', updated_at = now()
        FROM counted AS c
        WHERE j.id = c.job_id AND j.status = 'blocked' AND c.blocking = 0
        RETURNING j.id, j.attempts
    ), events AS (
        INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
        SELECT id, now(), 'blocked', 'pending', attempts, '{}'::jsonb FROM moved
    )
    SELECT count(*) INTO changed FROM moved;
    RETURN changed;
END
$$;
