-- What an operator or a service does besides: prune and delete finished
-- jobs with what goes with them, pause queues and schedules, dead letters'
-- notes and resolutions, alerts, the audit trail, sessions.

-- name: jobs_prunable
-- Oldest history first. A job whose dead letter is still open waits for an
-- operator, and a workflow step's parent for the steps after it to end.
SELECT d.id FROM redrive_job_done AS d
WHERE d.finished_at < :before
  AND NOT EXISTS (SELECT 1 FROM redrive_dead_letter AS l
                  WHERE l.job_id = d.id AND l.replayed_at IS NULL AND l.resolved_at IS NULL)
  -- a workflow step's parent stays while a step after it still waits (its result is read then)
  AND NOT EXISTS (SELECT 1 FROM redrive_edge AS e JOIN redrive_job AS c ON c.id = e.child_id
                  WHERE e.parent_id = d.id)
ORDER BY d.finished_at
LIMIT :limit;

-- name: jobs_deletable
SELECT id FROM redrive_job_done WHERE id IN (SELECT value FROM json_each(:ids));

-- name: prune_jobs
DELETE FROM redrive_job_done WHERE id IN (SELECT value FROM json_each(:ids));

-- name: prune_events
DELETE FROM redrive_job_event WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: prune_letters
DELETE FROM redrive_dead_letter WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: prune_keys
DELETE FROM redrive_job_key WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: prune_permits
DELETE FROM redrive_permit WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: prune_steps
DELETE FROM redrive_step WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: prune_edges
DELETE FROM redrive_edge
WHERE parent_id IN (SELECT value FROM json_each(:ids)) OR child_id IN (SELECT value FROM json_each(:ids));

-- name: prune_progress
DELETE FROM redrive_progress WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: prune_cancel_requests
DELETE FROM redrive_cancel_request WHERE job_id IN (SELECT value FROM json_each(:ids));

-- name: control_read
SELECT 'cancel' AS kind, job_id AS name, by FROM redrive_cancel_request
WHERE job_id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT 'pause', queue, by FROM redrive_queue_pause;

-- name: queue_pause
INSERT INTO redrive_queue_pause (queue, by, at) VALUES (:queue, :by, :now)
ON CONFLICT (queue) DO NOTHING RETURNING queue;

-- name: queue_resume
DELETE FROM redrive_queue_pause WHERE queue = :queue RETURNING queue;

-- name: dead_letters_resolve
UPDATE redrive_dead_letter
SET resolved_at = :now, resolved_by = :by,
    notes = CASE WHEN :note IS NULL THEN notes
                 ELSE json_insert(notes, '$[#]', json_object('at', :at, 'by', :by, 'text', :note)) END
WHERE id IN (SELECT value FROM json_each(:ids)) AND replayed_at IS NULL AND resolved_at IS NULL
RETURNING *;

-- name: dead_letter_note
UPDATE redrive_dead_letter
SET notes = json_insert(notes, '$[#]', json_object('at', :at, 'by', :by, 'text', :text))
WHERE id = :id
RETURNING *;

-- name: alert_fire
INSERT INTO redrive_alert (rule, incident, detail, fired_at) VALUES (:rule, :incident, :detail, :now)
ON CONFLICT (rule) DO NOTHING
RETURNING rule;

-- name: alert_resolve
DELETE FROM redrive_alert WHERE rule = :rule AND incident = :incident RETURNING rule;

-- name: audit_record
INSERT INTO redrive_audit (at, by, action, job_id, detail)
VALUES (:now, :by, :action, :job_id, :detail)
RETURNING id, at, by, action, job_id, detail;

-- name: session_forget_expired
DELETE FROM redrive_session WHERE expires_at < :now;

-- name: session_open
INSERT INTO redrive_session (id, principal, expires_at) VALUES (:id, :principal, :now + :ttl);

-- name: session_read
SELECT principal FROM redrive_session WHERE id = :id AND expires_at > :now;

-- name: session_close
DELETE FROM redrive_session WHERE id = :id;

-- name: schedule_pause
INSERT INTO redrive_schedule (name, fired_until, updated_at, paused_by) VALUES (:name, :at, :now, :by)
ON CONFLICT (name) DO UPDATE SET paused_by = excluded.paused_by, updated_at = :now
WHERE redrive_schedule.paused_by IS NULL
RETURNING name;

-- name: schedule_resume
UPDATE redrive_schedule SET paused_by = NULL, updated_at = :now
WHERE name = :name AND paused_by IS NOT NULL
RETURNING name;
