-- Two ways a job writes less WAL (bench/run dbcost, docs/storage.md).
--
-- Half of each page of the live table is left free at insert. A claim's
-- UPDATE is never HOT (it moves the job out of the waiting indexes), and on
-- a full page its new version goes to another page: PostgreSQL then locks
-- the old version in a record of its own and logs the new one whole. With
-- room on the row's own page it logs one record, less the bytes the two
-- versions share: about 75 bytes of WAL a job, more between checkpoints.
-- (Only pages filled from now on are affected: nothing is rewritten.)
ALTER TABLE redrive_job SET (fillfactor = 50);

-- A success's run timings, which every success has, in columns of their own:
-- 8 bytes of its history row where a JSON object took about 55. ended_meta
-- keeps what else the success said (its context, a skipped run's reason).
ALTER TABLE redrive_job ADD COLUMN ended_duration_ms integer, ADD COLUMN ended_wait_ms integer;
ALTER TABLE redrive_job_done ADD COLUMN ended_duration_ms integer, ADD COLUMN ended_wait_ms integer;

-- The view of migration 0032, with a success's meta put back together.
CREATE OR REPLACE VIEW redrive_job_event_read AS
SELECT id, job_id, at, from_status, to_status, attempt, meta FROM redrive_job_event
UNION ALL
SELECT e.id, j.id, e.at, e.from_status, e.to_status, e.attempt, e.meta
FROM (SELECT id, created_at, started_at, NULL::timestamptz AS finished_at, attempts, lease_owner, ran_by,
             implied_enqueued, implied_started, NULL::bigint AS implied_ended, NULL::jsonb AS ended_meta
      FROM redrive_job
      UNION ALL
      SELECT id, created_at, started_at, finished_at, attempts, lease_owner, ran_by,
             implied_enqueued, implied_started, implied_ended,
             coalesce(ended_meta, '{}') || jsonb_strip_nulls(jsonb_build_object(
                 'duration_ms', ended_duration_ms, 'wait_ms', ended_wait_ms))
      FROM redrive_job_done) AS j
CROSS JOIN LATERAL (VALUES
    (j.implied_enqueued, j.created_at, NULL, 'queued', 0, '{}'::jsonb),
    (j.implied_started, j.started_at, 'queued', 'running', 1,
     jsonb_build_object('worker', coalesce(j.ran_by, j.lease_owner))),
    (j.implied_ended, j.finished_at, 'running', 'succeeded', j.attempts, coalesce(j.ended_meta, '{}'))
) AS e(id, at, from_status, to_status, attempt, meta)
WHERE e.id IS NOT NULL;
