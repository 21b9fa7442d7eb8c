-- What an operator or a service does besides: prune and delete finished
-- jobs (the _cascade of what goes with them), pause queues and schedules,
-- dead letters' notes and resolutions, alerts, the audit trail, sessions.

-- name: _cascade
-- What goes with the finished jobs a statement deletes (its "jobs" step):
-- their events, letters, keys, cancel requests, permits, progress, and their
-- places and edges in a workflow.
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
), steps AS (
    DELETE FROM redrive_step AS s USING jobs WHERE s.job_id = jobs.id
), edges_out AS (
    DELETE FROM redrive_edge AS e USING jobs WHERE e.parent_id = jobs.id
), edges_in AS (
    DELETE FROM redrive_edge AS e USING jobs WHERE e.child_id = jobs.id
), progress AS (
    DELETE FROM redrive_progress AS p USING jobs WHERE p.job_id = jobs.id
)

-- name: jobs_prune
-- Oldest history first, a batch at a time. A job whose dead letter is still
-- open waits for an operator, and a workflow step's parent for the steps
-- after it to end; its letters and events go with it otherwise.
WITH doomed AS (
    SELECT d.id FROM redrive_job_done AS d
    WHERE d.finished_at < now() - %(older_than)s
      AND NOT EXISTS (SELECT 1 FROM redrive_dead_letter AS l
                      WHERE l.job_id = d.id AND l.replayed_at IS NULL AND l.resolved_at IS NULL)
      -- a workflow step's parent stays while a step after it still waits (its result is read then)
      AND NOT EXISTS (SELECT 1 FROM redrive_edge AS e JOIN redrive_job AS c ON c.id = e.child_id
                      WHERE e.parent_id = d.id)
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

-- name: alert_fire
INSERT INTO redrive_alert (rule, incident, detail, fired_at)
VALUES (%(rule)s, %(incident)s, %(detail)s, now())
ON CONFLICT (rule) DO NOTHING
RETURNING rule;

-- name: alert_resolve
DELETE FROM redrive_alert WHERE rule = %(rule)s AND incident = %(incident)s RETURNING rule;

-- name: audit_record
INSERT INTO redrive_audit (at, by, action, job_id, detail)
VALUES (now(), %(by)s, %(action)s, %(job_id)s, %(detail)s)
RETURNING id, at, by, action, job_id, detail;

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
