-- Queries both SQL stores run as written: ``:name`` parameters (the
-- PostgreSQL store reads them as ``%(name)s``), times as whole seconds since
-- the epoch, integer arithmetic that truncates in both dialects. A query a
-- store also names in its own queries.sql is an error (store/sql.py).

-- name: rollups_read
-- Added up into slots :grain_s wide (a chart's bars), shards together.
SELECT at / :grain_s * :grain_s AS at, queue, task, kind, bucket, sum(n) AS n
FROM redrive_rollup
WHERE at >= :since
GROUP BY at / :grain_s * :grain_s, queue, task, kind, bucket
ORDER BY 1, 2, 3, 4, 5;

-- name: rollups_forget
DELETE FROM redrive_rollup WHERE at < :before;
