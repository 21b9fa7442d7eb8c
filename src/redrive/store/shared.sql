-- Queries both SQL stores run: ``:name`` parameters (the PostgreSQL store
-- reads them as ``%(name)s``), a parameter tested for NULL cast to its type
-- (PostgreSQL must know it), integer arithmetic that truncates in both
-- dialects, and {word} where the dialects spell a type or the clock
-- differently (store/sql.py's SPELLINGS); a {_name} is a fragment named here.
-- A query a store also names in its own queries.sql is an error.

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
       OR (:state = 'escalated' AND escalated))
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
