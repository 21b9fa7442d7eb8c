-- Workflows (core/workflow.py): creating one in one transaction. Edges are
-- resolved by the endings, through redrive_settle and redrive_unblock
-- (migration 0027).

-- name: workflow_create
-- The workflow, and unless its key is taken (``made`` is then 0 and nothing
-- else is written): its steps (jobs: pending where they have parents, queued
-- otherwise), their places and counts, the edges between them and each
-- job's first event. One statement: it is also part of a spawner's ending.
WITH made AS (
    INSERT INTO redrive_workflow (id, name, owner, key, graph, created_at, spawned_by, open_steps)
    VALUES (%(id)s, %(name)s, %(owner)s, %(key)s, %(graph)s, now(), %(spawned_by)s, %(open)s)
    ON CONFLICT DO NOTHING
    RETURNING id
), input AS (
    SELECT * FROM jsonb_to_recordset(%(steps)s) AS x(
        id uuid, task text, queue text, args jsonb, kwargs jsonb, priority smallint,
        max_attempts integer, owner text, stage text, dependencies jsonb,
        name text, position integer, waiting integer)
    WHERE EXISTS (SELECT 1 FROM made)
), inserted AS (
    INSERT INTO redrive_job (id, task, queue, args, kwargs, status, priority, run_at,
                             attempts, max_attempts, owner, created_at, updated_at, stage,
                             dependencies, idempotency_key, version)
    SELECT id, task, queue, coalesce(args, '[]'), nullif(kwargs, '{}'),
           CASE WHEN waiting > 0 THEN 'pending' ELSE 'queued' END,
           coalesce(priority, 0), now(), 0, max_attempts, owner, now(), NULL, stage,
           nullif(dependencies, '[]'), NULL, NULL
    FROM input
    RETURNING id, status, queue
), steps AS (
    INSERT INTO redrive_step (job_id, workflow_id, name, position, waiting)
    SELECT id, %(id)s, name, position, waiting FROM input
), edges AS (
    INSERT INTO redrive_edge (parent_id, child_id, policy)
    SELECT parent_id, child_id, policy FROM jsonb_to_recordset(%(edges)s) AS e(parent_id uuid, child_id uuid, policy text)
    WHERE EXISTS (SELECT 1 FROM made)
), events AS (
    INSERT INTO redrive_job_event (job_id, at, from_status, to_status, attempt, meta)
    SELECT id, now(), NULL, status, 0, %(meta)s FROM inserted
), wake AS (
    SELECT pg_notify('redrive_jobs', queue) FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'queued') AS q
)
SELECT (SELECT count(*) FROM made) AS made, count(*) AS n, (SELECT count(*) FROM wake) AS woken FROM inserted;

-- name: workflow_by_key
SELECT id FROM redrive_workflow WHERE coalesce(owner, '') = coalesce(%(owner)s, '') AND key = %(key)s;

-- name: workflow_mark_cancelled
UPDATE redrive_workflow SET cancelled_at = coalesce(cancelled_at, now()), cancelled_by = coalesce(cancelled_by, %(by)s)
WHERE id = %(id)s RETURNING id;

-- name: workflows_counts
-- The steps of workflows (:ids) by workflow, name and status, in both job tables.
SELECT s.workflow_id, s.name, j.status, count(*) AS n
FROM redrive_step AS s
JOIN (SELECT id, status FROM redrive_job UNION ALL SELECT id, status FROM redrive_job_done) AS j ON j.id = s.job_id
WHERE s.workflow_id = ANY(%(ids)s::uuid[])
GROUP BY s.workflow_id, s.name, j.status;
