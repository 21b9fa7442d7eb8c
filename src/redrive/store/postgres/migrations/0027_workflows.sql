-- Workflows (core/workflow.py, docs/workflows.md): a step is a job; a step
-- with parents waits in the hot table as 'pending' (outside the claim's
-- partial indexes, so the claim never reads it), or 'blocked' when a parent
-- ended in a way its edge does not accept.
ALTER TABLE redrive_job DROP CONSTRAINT redrive_job_status,
    ADD CONSTRAINT redrive_job_status CHECK (status IN ('pending', 'blocked', 'scheduled', 'queued', 'running'));

CREATE TABLE redrive_workflow (
    id           uuid PRIMARY KEY,
    name         text NOT NULL,
    owner        text,
    key          text,
    graph        jsonb NOT NULL,  -- each step name's parents by name and policy, to draw it
    created_at   timestamptz NOT NULL,
    cancelled_at timestamptz,
    cancelled_by text
);
-- One workflow per key and owner: two processes creating it at once get one.
CREATE UNIQUE INDEX redrive_workflow_key ON redrive_workflow (coalesce(owner, ''), key) WHERE key IS NOT NULL;

-- A job that is a step: its place in its workflow, and the two counts that
-- decide when it runs (its parents not yet ended, its parents blocking it).
-- Two parents ending at once serialize on this row.
CREATE TABLE redrive_step (
    job_id      uuid PRIMARY KEY,
    workflow_id uuid NOT NULL,
    name        text NOT NULL,
    position    integer,
    waiting     integer NOT NULL CHECK (waiting >= 0),
    blocking    integer NOT NULL DEFAULT 0 CHECK (blocking >= 0)
);
CREATE INDEX redrive_step_workflow ON redrive_step (workflow_id, name, position);

-- Parent -> child, resolved once by the transaction that ends the parent.
CREATE TABLE redrive_edge (
    parent_id uuid NOT NULL,
    child_id  uuid NOT NULL,
    policy    text NOT NULL CHECK (policy IN ('succeeded', 'not_failed', 'ended')),
    state     text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'satisfied', 'blocking')),
    PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX redrive_edge_child ON redrive_edge (child_id);

-- The edges out of jobs that just reached a final ending, resolved in the
-- caller's transaction (the statement that ends them calls it; a plain job
-- has no edge and never gets here). Each child's counts change by an update
-- of its step row, taken in id order so two endings cannot deadlock; the one
-- that leaves no parent waiting releases it (pending -> queued), the one
-- whose edge blocks holds it (pending -> blocked). The rule is
-- core/workflow.py's edge_state and step_status.
CREATE FUNCTION redrive_settle(ended uuid[], statuses text[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    kids uuid[];
    states text[];
    changed integer;
BEGIN
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
        RETURN 0;
    END IF;
    PERFORM 1 FROM redrive_step WHERE job_id = ANY(kids) ORDER BY job_id FOR UPDATE;
    WITH tally AS (
        SELECT k AS child_id, count(*) AS n, count(*) FILTER (WHERE st = 'blocking') AS blocked
        FROM unnest(kids, states) AS u(k, st) GROUP BY k
    ), counted AS (
        UPDATE redrive_step AS s SET waiting = s.waiting - t.n, blocking = s.blocking + t.blocked
        FROM tally AS t WHERE s.job_id = t.child_id
        RETURNING s.job_id, s.waiting, s.blocking
    ), moved AS (
        UPDATE redrive_job AS j
        SET status = CASE WHEN c.blocking > 0 THEN 'blocked' ELSE 'queued' END,
            run_at = CASE WHEN c.blocking > 0 THEN j.run_at ELSE now() END,
            updated_at = now()
        FROM counted AS c
        WHERE j.id = c.job_id AND j.status = 'pending' AND (c.blocking > 0 OR c.waiting = 0)
        RETURNING j.id, j.queue, j.status, j.attempts
    ), events AS (
        INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
        SELECT id, now(), 'pending', status, attempts, '{}'::jsonb FROM moved
    ), wake AS (
        SELECT pg_notify('redrive_jobs', queue) FROM (SELECT DISTINCT queue FROM moved WHERE status = 'queued') AS q
    )
    SELECT count(*) + 0 * (SELECT count(*) FROM wake) INTO changed FROM moved;
    RETURN changed;
END
$$;

-- A failed parent revived (a retry, a dead letter replayed): the edges it
-- blocked wait on it again, and a child nothing else blocks goes back to
-- pending (blocked -> pending), in the transaction that revives it.
CREATE FUNCTION redrive_unblock(revived uuid[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    kids uuid[];
    changed integer;
BEGIN
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
