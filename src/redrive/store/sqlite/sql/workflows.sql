-- Workflows (core/workflow.py): creating one, and resolving its edges in
-- the transaction that ends a parent (store/sqlite/edges.py).

-- name: workflow_insert
INSERT INTO redrive_workflow (id, name, owner, key, graph, created_at, spawned_by)
VALUES (:id, :name, :owner, :key, :graph, :now, :spawned_by)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: workflow_by_key
SELECT id FROM redrive_workflow WHERE coalesce(owner, '') = coalesce(:owner, '') AND key = :key;

-- name: step_insert
INSERT INTO redrive_step (job_id, workflow_id, name, position, waiting) VALUES (:job_id, :workflow_id, :name, :position, :waiting);

-- name: edge_insert
INSERT INTO redrive_edge (parent_id, child_id, policy) VALUES (:parent_id, :child_id, :policy);

-- name: edges_parents
-- Which of the jobs that just ended (:ids, JSON) have edges: a plain job has none.
SELECT DISTINCT parent_id FROM redrive_edge WHERE parent_id IN (SELECT value FROM json_each(:ids));

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
