-- Queries both SQL stores run: ``:name`` parameters (the PostgreSQL store
-- reads them as ``%(name)s``), a parameter tested for NULL cast to its type
-- (PostgreSQL must know it), integer arithmetic that truncates in both
-- dialects, and {word} where the dialects spell a type or the clock
-- differently (store/sql.py's SPELLINGS); a {_name} is a fragment named here.
-- A query a store also names in its own sql/ files is an error.

-- name: rollups_read
-- Added up into slots :grain_s wide (a chart's bars), per queue or per task
-- (:by), shards together; without :timed, buckets together and no waits.
SELECT at, key, kind, bucket, sum(n) AS n
FROM (SELECT at / :grain_s * :grain_s AS at, CASE WHEN CAST(:by AS TEXT) = 'task' THEN task ELSE queue END AS key,
             kind, CASE WHEN :timed THEN bucket ELSE -1 END AS bucket, n
      FROM redrive_rollup
      WHERE at >= :since AND (:timed OR kind <> 'wait')) AS r
GROUP BY at, key, kind, bucket
ORDER BY at, key, kind, bucket;

-- name: rollups_forget
DELETE FROM redrive_rollup WHERE at < :before;

-- name: dead_letters_tally
-- Kept by triggers as letters open and close (PostgreSQL migration 0025,
-- SQLite 0020); :state null counts every letter.
SELECT task, error_class, stage, sum(n) AS n FROM redrive_dead_letter_tally
WHERE CAST(:state AS TEXT) IS NULL OR state = CAST(:state AS TEXT)
GROUP BY task, error_class, stage
HAVING sum(n) > 0;

-- name: _letter_filter
-- The dead letters a list or its facets show: every filter of DeadLetterFilter
-- (left out: NULL). Age is from the last failure.
(CAST(:error_class AS TEXT) IS NULL OR error_class = :error_class)
  AND (CAST(:stage AS TEXT) IS NULL OR stage = :stage)
  AND (CAST(:task AS TEXT) IS NULL OR task = :task)
  AND (CAST(:owner AS TEXT) IS NULL OR owner = :owner)
  AND (CAST(:job_id AS {uuid}) IS NULL OR job_id = CAST(:job_id AS {uuid}))
  AND (CAST(:state AS TEXT) IS NULL
       OR (:state = 'open' AND replayed_at IS NULL AND resolved_at IS NULL)
       OR (:state = 'replayed' AND replayed_at IS NOT NULL)
       OR (:state = 'resolved' AND resolved_at IS NOT NULL)
       OR (:state = 'escalated' AND escalated AND replayed_at IS NULL AND resolved_at IS NULL))
  AND (CAST(:older_than_s AS DOUBLE PRECISION) IS NULL
       OR last_failure_at <= {now} - CAST(:older_than_s AS DOUBLE PRECISION) * {second})
  AND (CAST(:newer_than_s AS DOUBLE PRECISION) IS NULL
       OR last_failure_at > {now} - CAST(:newer_than_s AS DOUBLE PRECISION) * {second})

-- name: dead_letters_page
SELECT * FROM redrive_dead_letter
WHERE {_letter_filter}
  AND (CAST(:after_id AS BIGINT) IS NULL OR id < :after_id)
ORDER BY id DESC
LIMIT :limit;

-- name: dead_letter_facets
-- one row per (task, error class, stage): a handful, added up by DeadLetterFacets.of
SELECT task, error_class, coalesce(stage, '') AS stage, count(*) AS n
FROM redrive_dead_letter
WHERE {_letter_filter}
GROUP BY task, error_class, coalesce(stage, '');

-- name: _job_columns
-- A job's columns, named: the two tables hold them in different orders on
-- PostgreSQL (the live one has the claim's last, migration 0039).
id, task, queue, args, kwargs, status, priority, run_at, attempts, max_attempts, owner, lease_token, lease_owner,
lease_expires_at, last_error_code, last_error_message, error_code, error_message, result, created_at, updated_at,
started_at, finished_at, failed_at, stage, stage_attempts, checkpoint, manual_retry_count, first_failed_at,
dependencies, idempotency_key, version

-- name: job_get
SELECT {_job_columns} FROM redrive_job WHERE id = :id
UNION ALL
SELECT {_job_columns} FROM redrive_job_done WHERE id = :id;

-- name: job_events_list
SELECT * FROM {events} WHERE job_id = :id ORDER BY id;

-- name: job_events_newest
SELECT * FROM (SELECT * FROM {events} WHERE job_id = :id ORDER BY id DESC LIMIT :newest) AS e ORDER BY id;

-- name: jobs_held
-- The running jobs of one worker process, seen dead: taken back at once.
SELECT id, lease_token, lease_owner, attempts, max_attempts
FROM redrive_job
WHERE status = 'running' AND lease_owner = :worker_id
LIMIT :limit;

-- name: _job_filter
-- The jobs a list shows: every filter of JobFilter (left out: NULL).
-- {in_statuses} is an array test on PostgreSQL, which plans it onto the
-- index of failed and cancelled history, and a JSON list on SQLite.
(CAST(:statuses AS {text_list}) IS NULL OR status {in_statuses})
  AND (CAST(:queue AS TEXT) IS NULL OR queue = :queue)
  AND (CAST(:task AS TEXT) IS NULL OR task = :task)
  AND (CAST(:owner AS TEXT) IS NULL OR owner = :owner)
  AND (CAST(:error_code AS TEXT) IS NULL OR coalesce(error_code, last_error_code) = :error_code)
  AND (CAST(:idempotency_key AS TEXT) IS NULL OR idempotency_key = :idempotency_key)
  AND (CAST(:created_after AS {time}) IS NULL OR created_at >= :created_after)
  AND (CAST(:created_before AS {time}) IS NULL OR created_at < :created_before)
  AND (CAST(:after_at AS {time}) IS NULL OR (created_at, id) < (:after_at, CAST(:after_id AS {uuid})))

-- name: jobs_page
-- Newest first over both tables, a page past the cursor (:after_at, :after_id).
-- Each table gives its own first :limit rows in order (history by its
-- (created_at, id) index), so a page never sorts the whole history;
-- :live and :done leave out the table a status filter cannot match.
-- PostgreSQL's live index leaves out running jobs (migration 0035): they are
-- read apart, from their own index in the same order (migration 0038);
-- SQLite reads them in one.
SELECT * FROM (
    SELECT * FROM (SELECT {_job_columns} FROM redrive_job WHERE CAST(:live AS BOOLEAN) AND {_job_filter} AND {not_running}
                   ORDER BY created_at DESC, id DESC LIMIT :limit) AS live
    UNION ALL
    SELECT * FROM (SELECT {_job_columns} FROM redrive_job WHERE CAST(:live AS BOOLEAN) AND {_job_filter} AND {running_apart}
                   ORDER BY created_at DESC, id DESC LIMIT :limit) AS running
    UNION ALL
    SELECT * FROM (SELECT {_job_columns} FROM redrive_job_done WHERE CAST(:done AS BOOLEAN) AND {_job_filter}
                   ORDER BY created_at DESC, id DESC LIMIT :limit) AS done
) AS page
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: dead_letter_get
SELECT * FROM redrive_dead_letter WHERE id = :id;

-- name: schedules_list
SELECT name, fired_until, updated_at, paused_by FROM redrive_schedule ORDER BY name;

-- name: workers_list
SELECT id, host, pid, queues, concurrency, version, running, detail, started_at, heartbeat_at
FROM redrive_worker ORDER BY started_at, id;

-- name: alerts_firing
SELECT rule, incident FROM redrive_alert ORDER BY rule;

-- name: audits_list
SELECT id, at, by, action, job_id, detail FROM redrive_audit WHERE job_id = :job_id ORDER BY id;

-- name: audits_general
SELECT * FROM (SELECT id, at, by, action, job_id, detail FROM redrive_audit
               WHERE job_id IS NULL ORDER BY id DESC LIMIT 1000) AS latest
ORDER BY id;

-- name: breaker_events_list
SELECT name, at, from_state, to_state, reason, by FROM redrive_breaker_event
WHERE name = :name ORDER BY id;

-- name: workflow_read
SELECT * FROM redrive_workflow WHERE id = CAST(:id AS {uuid});

-- name: workflow_steps
-- A workflow's steps (in :statuses, when given), by name and place.
SELECT s.job_id, s.name, s.position, j.status
FROM redrive_step AS s
JOIN (SELECT id, status FROM redrive_job UNION ALL SELECT id, status FROM redrive_job_done) AS j ON j.id = s.job_id
WHERE s.workflow_id = CAST(:id AS {uuid}) AND (CAST(:statuses AS {text_list}) IS NULL OR j.status {in_statuses})
ORDER BY s.name, s.position;

-- name: step_parents
-- What a running step reads of its parents: each one's name, place, ending and result.
SELECT e.parent_id, s.name, s.position, j.status, j.result, coalesce(j.error_code, j.last_error_code) AS error_code
FROM redrive_edge AS e
JOIN redrive_step AS s ON s.job_id = e.parent_id
JOIN (SELECT id, status, result, error_code, last_error_code FROM redrive_job
      UNION ALL SELECT id, status, result, error_code, last_error_code FROM redrive_job_done) AS j ON j.id = e.parent_id
WHERE e.child_id = CAST(:id AS {uuid})
ORDER BY s.name, s.position;

-- name: workflows_recent
-- The newest workflows (an owner's, when given), newest first, a page past
-- the cursor (:after_at, :after_id).
SELECT * FROM redrive_workflow
WHERE (CAST(:owner AS TEXT) IS NULL OR owner = :owner)
  AND (CAST(:after_at AS {time}) IS NULL OR (created_at, id) < (:after_at, CAST(:after_id AS {uuid})))
ORDER BY created_at DESC, id DESC
LIMIT :limit;
