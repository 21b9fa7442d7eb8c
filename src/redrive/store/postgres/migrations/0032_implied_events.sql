-- A job's happy-path events are not written as rows: the job's own row
-- implies them (docs/storage.md). Each such event keeps the id it would have
-- had, taken from the events' sequence when it happened, so a job's history
-- reads in the same order as before; the row keeps what the event would have
-- said that the row does not:
--   implied_enqueued  queued at created_at (a job enqueued due, with nothing
--                     in its event's meta)
--   implied_started   queued -> running at started_at, attempt 1; its worker
--                     is lease_owner while that first run holds the lease,
--                     then ran_by
--   implied_ended     running -> succeeded at finished_at, with ended_meta
ALTER TABLE redrive_job ADD COLUMN implied_enqueued bigint, ADD COLUMN implied_started bigint,
    ADD COLUMN implied_ended bigint, ADD COLUMN ran_by text, ADD COLUMN ended_meta jsonb;
ALTER TABLE redrive_job_done ADD COLUMN implied_enqueued bigint, ADD COLUMN implied_started bigint,
    ADD COLUMN implied_ended bigint, ADD COLUMN ran_by text, ADD COLUMN ended_meta jsonb;

-- Every event of every job, written or implied: what each read of a job's
-- history reads (a filter on job_id reaches each part's primary key).
CREATE VIEW redrive_job_event_read AS
SELECT id, job_id, at, from_status, to_status, attempt, meta FROM redrive_job_event
UNION ALL
SELECT e.id, j.id, e.at, e.from_status, e.to_status, e.attempt, e.meta
FROM (SELECT id, created_at, started_at, NULL::timestamptz AS finished_at, attempts, lease_owner, ran_by,
             implied_enqueued, implied_started, NULL::bigint AS implied_ended, NULL::jsonb AS ended_meta
      FROM redrive_job
      UNION ALL
      SELECT id, created_at, started_at, finished_at, attempts, lease_owner, ran_by,
             implied_enqueued, implied_started, implied_ended, ended_meta
      FROM redrive_job_done) AS j
CROSS JOIN LATERAL (VALUES
    (j.implied_enqueued, j.created_at, NULL, 'queued', 0, '{}'::jsonb),
    (j.implied_started, j.started_at, 'queued', 'running', 1,
     jsonb_build_object('worker', coalesce(j.ran_by, j.lease_owner))),
    (j.implied_ended, j.finished_at, 'running', 'succeeded', j.attempts, coalesce(j.ended_meta, '{}'))
) AS e(id, at, from_status, to_status, attempt, meta)
WHERE e.id IS NOT NULL;
