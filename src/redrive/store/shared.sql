-- Queries both SQL stores run as written: ``:name`` parameters (the
-- PostgreSQL store reads them as ``%(name)s``), times as whole seconds since
-- the epoch, integer arithmetic that truncates in both dialects. A query a
-- store also names in its own queries.sql is an error (store/sql.py).

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
