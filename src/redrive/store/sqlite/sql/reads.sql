-- The read side SQLite answers in its own way: queue counts (its index
-- walked up to a bound), what ended lately, the outbox's pages.

-- name: queues_stats
-- Never a scan of the table (migration 0018's index): the queues found by
-- skipping through the index, then per queue and waiting state a count of
-- its index entries that stops at :cap (then the store says "at least") and
-- its first (oldest) one; running jobs apart.
WITH RECURSIVE queues(queue) AS (
    SELECT (SELECT queue FROM redrive_job WHERE status IN ('scheduled', 'queued') ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM redrive_job AS j
            WHERE j.status IN ('scheduled', 'queued') AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
    FROM queues AS q WHERE q.queue IS NOT NULL
)
SELECT q.queue, s.status,
    (SELECT count(*) FROM (SELECT 1 FROM redrive_job AS j
                           WHERE j.queue = q.queue AND j.status = s.status AND j.status IN ('scheduled', 'queued')
                           LIMIT :cap)) AS n,
    (SELECT min(j.run_at) FROM redrive_job AS j
     WHERE j.queue = q.queue AND j.status = s.status AND j.status IN ('scheduled', 'queued')
       AND j.run_at <= :now) AS oldest_due,
    NULL AS oldest_running
FROM queues AS q CROSS JOIN (SELECT 'scheduled' AS status UNION ALL SELECT 'queued') AS s
WHERE q.queue IS NOT NULL
UNION ALL
SELECT queue, 'running', count(*), NULL, min(started_at)
FROM redrive_job
WHERE status = 'running'
GROUP BY queue
ORDER BY 1, 2;

-- name: runs_ended
SELECT d.finished_at AS at, d.task, d.status = 'failed' AS failed,
    (SELECT json_extract(e.meta, '$.duration_ms') / 1000.0 FROM redrive_job_event AS e
     WHERE e.job_id = d.id ORDER BY e.id DESC LIMIT 1) AS duration_s
FROM redrive_job_done AS d
WHERE d.finished_at >= :since AND d.status IN ('succeeded', 'failed')
ORDER BY d.finished_at DESC
LIMIT :limit;

-- name: outbox_page
SELECT * FROM redrive_outbox
WHERE (:status IS NULL OR status = :status) AND (:job_id IS NULL OR job_id = :job_id)
  AND (:after_at IS NULL OR (created_at, key) > (:after_at, :after_key))
ORDER BY created_at, key
LIMIT :limit;

-- name: progress_read
SELECT job_id, at, value FROM redrive_progress WHERE job_id IN (SELECT value FROM json_each(:ids));
