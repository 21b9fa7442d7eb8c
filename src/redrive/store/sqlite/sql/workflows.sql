-- Workflows (core/workflow.py): creating one, and resolving its edges in
-- the transaction that ends a parent (store/sqlite/edges.py).

-- name: workflow_insert
INSERT INTO redrive_workflow (id, name, owner, key, graph, created_at, spawned_by, open_steps)
VALUES (:id, :name, :owner, :key, :graph, :now, :spawned_by, :open)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: workflow_by_key
SELECT id FROM redrive_workflow WHERE coalesce(owner, '') = coalesce(:owner, '') AND key = :key;

-- name: step_insert
INSERT INTO redrive_step (job_id, workflow_id, name, position, waiting) VALUES (:job_id, :workflow_id, :name, :position, :waiting);

-- name: edge_insert
INSERT INTO redrive_edge (parent_id, child_id, policy) VALUES (:parent_id, :child_id, :policy);

-- name: steps_of
-- Which of the jobs that just ended (:ids, JSON) are steps, and of which workflow: a plain job is none.
SELECT s.job_id, s.workflow_id, w.name AS workflow_name
FROM redrive_step AS s JOIN redrive_workflow AS w ON w.id = s.workflow_id
WHERE s.job_id IN (SELECT value FROM json_each(:ids))
ORDER BY s.job_id;

-- name: workflow_steps_ended
UPDATE redrive_workflow SET open_steps = open_steps - :n WHERE id = :id
RETURNING open_steps, name, cancelled_at;

-- name: workflow_endings
-- A workflow's steps that ended other than succeeded, once its last step ended.
SELECT j.status FROM redrive_step AS s JOIN redrive_job_done AS j ON j.id = s.job_id
WHERE s.workflow_id = :id AND j.status IN ('failed', 'cancelled');

-- name: workflow_step_reopened
UPDATE redrive_workflow SET open_steps = open_steps + 1
WHERE id = (SELECT workflow_id FROM redrive_step WHERE job_id = :id);

-- name: edges_resolve
-- core/workflow.py's edge_state, for the pending edges out of one parent that ended as :status.
UPDATE redrive_edge
SET state = CASE WHEN :status = 'succeeded' OR policy = 'ended' OR (:status = 'cancelled' AND policy = 'not_failed')
                 THEN 'satisfied' ELSE 'blocking' END
WHERE parent_id = :id AND state = 'pending'
RETURNING child_id, state;

-- name: edges_reopen
UPDATE redrive_edge SET state = 'pending' WHERE parent_id = :id AND state = 'blocking' RETURNING child_id;

-- name: step_count
UPDATE redrive_step SET waiting = waiting + :waiting, blocking = blocking + :blocking
WHERE job_id = :id RETURNING waiting, blocking;

-- name: step_move
UPDATE redrive_job
SET status = :to, run_at = CASE WHEN :to = 'queued' THEN :now ELSE run_at END, updated_at = :now
WHERE id = :id AND status = :from
RETURNING queue, attempts;

-- name: workflow_mark_cancelled
UPDATE redrive_workflow SET cancelled_at = coalesce(cancelled_at, :now), cancelled_by = coalesce(cancelled_by, :by)
WHERE id = :id RETURNING id;

-- name: workflows_counts
-- The steps of workflows (:ids) by workflow, name and status, in both job tables.
SELECT s.workflow_id, s.name, j.status, count(*) AS n
FROM redrive_step AS s
JOIN (SELECT id, status FROM redrive_job UNION ALL SELECT id, status FROM redrive_job_done) AS j ON j.id = s.job_id
WHERE s.workflow_id IN (SELECT value FROM json_each(:ids))
GROUP BY s.workflow_id, s.name, j.status;
