-- The live table again, written for less WAL a job (bench/run dbcost,
-- docs/storage.md). Each part below was measured alone on 4,000 jobs.
--
-- The columns a claim changes come last. When an UPDATE's new version stays
-- on its page, PostgreSQL logs only the bytes between the first and the last
-- that differ from the old version. The claim changes the status, the
-- attempts, the times and the lease, which sat among the columns it leaves
-- alone (the status was the sixth of 39), so each claim logged most of the
-- row again: with them last it logs those alone (54 bytes a job less). The
-- lease's expiry comes before its token and owner, so that a heartbeat logs
-- little more than the expiry (63 bytes less for three extensions).
--
-- 40 % of each page is filled at insert, not 50 % (migration 0037): a
-- claimed row is about 60 bytes longer (its lease, its start), and at 50 % a
-- quarter of a claim's new versions found no room on their page and went to
-- another, whole and with a lock record of their own (38 bytes a job less).
--
-- What almost every job holds when it is written is stored as NULL and read
-- as the value: a version of 1 (a key's take-over raises it), no manual
-- retries, and an updated_at equal to created_at until the job first changes
-- or, in the history, to finished_at (8 bytes each; what the readers see is
-- unchanged: codecs.py). The history's version and manual retries are
-- written as the live row had them.
--
-- The history keeps its order: rows are only ever inserted there, and every
-- statement names the columns it reads from both tables (_job_columns).
-- A job's row is rewritten once here; the live table holds only the jobs
-- that may still run, the waiting and the running, not the history.
DROP VIEW redrive_job_event_read;

CREATE TABLE redrive_job_reordered (
    id                 uuid NOT NULL,
    task               text NOT NULL,
    queue              text NOT NULL,
    args               jsonb NOT NULL,
    kwargs             jsonb,
    priority           smallint NOT NULL,
    max_attempts       integer NOT NULL,
    owner              text,
    created_at         timestamptz NOT NULL,
    run_at             timestamptz NOT NULL,
    stage              text,
    dependencies       jsonb,
    idempotency_key    text,
    version            integer,
    implied_enqueued   bigint,
    manual_retry_count integer,
    stage_attempts     jsonb,
    checkpoint         jsonb,
    first_failed_at    timestamptz,
    last_error_code    text,
    last_error_message text,
    error_code         text,
    error_message      text,
    result             jsonb,
    finished_at        timestamptz,
    failed_at          timestamptz,
    implied_ended      bigint,
    ran_by             text,
    ended_meta         jsonb,
    ended_duration_ms  integer,
    ended_wait_ms      integer,
    -- what a claim changes
    status             text NOT NULL,
    attempts           integer NOT NULL,
    started_at         timestamptz,
    implied_started    bigint,
    updated_at         timestamptz,
    lease_expires_at   timestamptz,
    lease_token        uuid,
    lease_owner        text
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01,
        autovacuum_analyze_scale_factor = 0.02);

INSERT INTO redrive_job_reordered (
    id, task, queue, args, kwargs, priority, max_attempts, owner, created_at, run_at, stage, dependencies,
    idempotency_key, version, implied_enqueued, manual_retry_count, stage_attempts, checkpoint, first_failed_at,
    last_error_code, last_error_message, error_code, error_message, result, finished_at, failed_at, implied_ended,
    ran_by, ended_meta, ended_duration_ms, ended_wait_ms, status, attempts, started_at, implied_started, updated_at,
    lease_expires_at, lease_token, lease_owner)
SELECT
    id, task, queue, args, kwargs, priority, max_attempts, owner, created_at, run_at, stage, dependencies,
    idempotency_key, nullif(version, 1), implied_enqueued, nullif(manual_retry_count, 0), stage_attempts,
    checkpoint, first_failed_at, last_error_code, last_error_message, error_code, error_message, result,
    finished_at, failed_at, implied_ended, ran_by, ended_meta, ended_duration_ms, ended_wait_ms, status, attempts,
    started_at, implied_started, nullif(updated_at, created_at), lease_expires_at, lease_token, lease_owner
FROM redrive_job;

DROP TABLE redrive_job;
ALTER TABLE redrive_job_reordered RENAME TO redrive_job;
ALTER TABLE redrive_job_done
    ALTER COLUMN version DROP NOT NULL, ALTER COLUMN version DROP DEFAULT,
    ALTER COLUMN manual_retry_count DROP NOT NULL, ALTER COLUMN manual_retry_count DROP DEFAULT,
    ALTER COLUMN updated_at DROP NOT NULL;

-- Its constraints, indexes and statistics as migrations 0001-0038 left them.
ALTER TABLE redrive_job
    ADD CONSTRAINT redrive_job_pkey PRIMARY KEY (id),
    ADD CONSTRAINT redrive_job_status CHECK (status IN ('pending', 'blocked', 'scheduled', 'queued', 'running')),
    ADD CONSTRAINT redrive_job_attempts CHECK (attempts >= 0 AND max_attempts >= 1),
    ADD CONSTRAINT redrive_job_lease CHECK (
        (status = 'running') = (lease_token IS NOT NULL)
        AND (lease_token IS NULL) = (lease_owner IS NULL)
        AND (lease_token IS NULL) = (lease_expires_at IS NULL)),
    ADD CONSTRAINT redrive_job_unfinished CHECK (
        result IS NULL AND error_code IS NULL AND error_message IS NULL
        AND finished_at IS NULL AND failed_at IS NULL);
CREATE INDEX redrive_job_due ON redrive_job (priority, run_at) WHERE status IN ('scheduled', 'queued');
CREATE INDEX redrive_job_waiting ON redrive_job (queue, status, run_at) WHERE status IN ('scheduled', 'queued');
CREATE INDEX redrive_job_created ON redrive_job (created_at, id) WHERE status <> 'running';
CREATE INDEX redrive_job_running ON redrive_job (created_at) WHERE status = 'running';
CREATE STATISTICS redrive_job_queue_status (mcv) ON queue, status FROM redrive_job;
ANALYZE redrive_job;

-- The view of migration 0037, unchanged: it went with the table it reads.
CREATE VIEW redrive_job_event_read AS
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
