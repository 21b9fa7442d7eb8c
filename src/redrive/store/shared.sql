-- Queries both SQL stores run as written: ``:name`` parameters (the
-- PostgreSQL store reads them as ``%(name)s``), times as whole seconds since
-- the epoch, integer arithmetic that truncates in both dialects. A query a
-- store also names in its own queries.sql is an error (store/sql.py).

-- name: rollups_read
SELECT at, queue, task, kind, bucket, sum(n) AS n
FROM redrive_rollup
WHERE at >= :since
GROUP BY at, queue, task, kind, bucket
ORDER BY at, queue, task, kind, bucket;

-- name: rollups_forget
DELETE FROM redrive_rollup WHERE at < :before;
