-- The read side PostgreSQL answers in its own way: queue counts (exact up
-- to a cap, then its own count of live rows shared out), what ended lately,
-- the outbox's pages.

-- name: queues_waiting
-- The queues with waiting jobs, found by skipping through migration 0023's
-- index (a step per queue, never a step per job).
WITH RECURSIVE queues AS (
    (SELECT queue FROM redrive_job WHERE status IN ('scheduled', 'queued') ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM redrive_job AS j
            WHERE j.status IN ('scheduled', 'queued') AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
    FROM queues AS q WHERE q.queue IS NOT NULL
)
SELECT queue FROM queues WHERE queue IS NOT NULL;

-- name: queues_stats
-- Never every waiting job: per queue of :queues (queues_waiting) and waiting
-- state, its oldest entry in the index and a count that stops at :cap (the
-- store asks the planner beyond it: queue_estimate); running jobs exactly,
-- from the running jobs' index (migration 0038). The queues come as an array so the plan's
-- cost stays that of a few index probes (a recursive CTE here made it look
-- big enough to compile).
SELECT q.queue, s.status,
    -- in the index's order, so the planner walks the index (a scan of the table
    -- that stops at the cap would read all of it for an empty state)
    (SELECT count(*) FROM (SELECT FROM redrive_job AS j
                           WHERE j.queue = q.queue AND j.status = s.status AND j.status IN ('scheduled', 'queued')
                           ORDER BY j.run_at LIMIT %(cap)s) AS c) AS n,
    extract(epoch FROM now() - (SELECT j.run_at FROM redrive_job AS j
                                WHERE j.queue = q.queue AND j.status = s.status
                                  AND j.status IN ('scheduled', 'queued') AND j.run_at <= now()
                                ORDER BY j.run_at LIMIT 1))::float8 AS oldest_due_age_s,
    NULL::float8 AS oldest_running_age_s
FROM unnest(%(queues)s::text[]) AS q(queue) CROSS JOIN (VALUES ('scheduled'), ('queued')) AS s(status)
UNION ALL
SELECT queue, 'running', count(*), NULL, extract(epoch FROM now() - min(started_at))::float8
FROM redrive_job
WHERE status = 'running'
GROUP BY queue
ORDER BY 1, 2;

-- name: queue_estimate
-- The planner's row estimate for one queue's jobs in one state (FORMAT JSON).
EXPLAIN (FORMAT JSON) SELECT FROM redrive_job WHERE queue = %(queue)s AND status = %(status)s;

-- name: queues_estimate
-- What the store knows of the waiting counts past the exact ones, for every
-- queue at once: the table's live rows, as PostgreSQL keeps their count at
-- each commit (no ANALYZE needed; a backend reports its changes within a
-- second of going idle, or ten after a burst); and how the planner reckons
-- they share out, from the joint statistics' most common (queue, state)
-- pairs (migration 0023; null pairs: never analyzed) and the table's rows now
-- (rows per page at the last ANALYZE times its pages now).
SELECT s.most_common_vals AS pairs, s.most_common_freqs AS freqs,
    CASE WHEN c.relpages > 0
         THEN c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::float8)
    END AS rows,
    pg_stat_get_live_tuples(c.oid) AS live
FROM pg_class AS c
LEFT JOIN pg_stats_ext AS s ON s.statistics_name = 'redrive_job_queue_status'
    AND s.schemaname = c.relnamespace::regnamespace::text
WHERE c.oid = 'redrive_job'::regclass;

-- name: queues_count
-- The waiting jobs of each (:queues[i], :statuses[i]), counted in the waiting
-- jobs' index up to :cap: the estimate's exact floor where a share looks small.
SELECT p.queue, p.status,
    (SELECT count(*) FROM (SELECT FROM redrive_job AS j
                           WHERE j.queue = p.queue AND j.status = p.status AND j.status IN ('scheduled', 'queued')
                           ORDER BY j.run_at LIMIT %(cap)s) AS c) AS n
FROM unnest(%(queues)s::text[], %(statuses)s::text[]) AS p(queue, status);

-- name: runs_ended
SELECT d.finished_at AS at, d.task, d.status = 'failed' AS failed,
    -- a success's event is in its row (migration 0032), any other ending's is the job's last
    CASE WHEN d.implied_ended IS NOT NULL
         THEN coalesce(d.ended_duration_ms, (d.ended_meta->>'duration_ms')::double precision) / 1000
         ELSE (SELECT (e.meta->>'duration_ms')::double precision / 1000 FROM redrive_job_event AS e
               WHERE e.job_id = d.id ORDER BY e.id DESC LIMIT 1) END AS duration_s
FROM redrive_job_done AS d
WHERE d.finished_at >= %(since)s AND d.status IN ('succeeded', 'failed')
ORDER BY d.finished_at DESC
LIMIT %(limit)s;

-- name: outbox_page
SELECT * FROM redrive_outbox
WHERE (%(status)s::text IS NULL OR status = %(status)s) AND (%(job_id)s::uuid IS NULL OR job_id = %(job_id)s)
  AND (%(after_at)s::timestamptz IS NULL OR (created_at, key) > (%(after_at)s::timestamptz, %(after_key)s::text))
ORDER BY created_at, key
LIMIT %(limit)s;

-- name: progress_read
SELECT job_id, at, value FROM redrive_progress WHERE job_id = ANY(%(ids)s::uuid[]);
