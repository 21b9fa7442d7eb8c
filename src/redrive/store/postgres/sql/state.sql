-- The state every worker shares: breakers, outbox rows, schedules'
-- checkpoints, the worker registry, and the rollups' folding.

-- name: breaker_read
-- A breaker and its version, created closed if new (a row another worker
-- is creating this instant may be missing from the answer: read again).
WITH made AS (
    INSERT INTO redrive_breaker (name, state, data, updated_at)
    VALUES (%(name)s, 'closed', %(initial)s, now())
    ON CONFLICT (name) DO NOTHING
    RETURNING data, version
)
SELECT data, version, extract(epoch FROM now())::float8 AS now FROM made
UNION ALL
SELECT data, version, extract(epoch FROM now())::float8 FROM redrive_breaker WHERE name = %(name)s;

-- name: breaker_write
-- The change decided from :version, only if no one wrote since (then it
-- answers no row, and the caller reads again), with each state change it
-- made as an event: one statement, no lock held between the read and it.
WITH saved AS (
    UPDATE redrive_breaker SET state = %(state)s, data = %(data)s, version = version + 1, updated_at = now()
    WHERE name = %(name)s AND version = %(version)s
    RETURNING name
), told AS (
    INSERT INTO redrive_breaker_event (name, at, from_state, to_state, reason, by)
    SELECT s.name, now(), c.e->>'from_state', c.e->>'to_state', c.e->>'reason', %(by)s
    FROM saved AS s, jsonb_array_elements(%(changes)s) WITH ORDINALITY AS c(e, n)
    ORDER BY c.n
)
SELECT name FROM saved;

-- name: breakers_list
SELECT name, data, extract(epoch FROM now())::float8 AS now FROM redrive_breaker ORDER BY name;

-- name: outbox_open
-- Creates the row if it is new and returns it, fenced on the job's lease. The
-- no-op update makes a row another job just committed come back too.
WITH fence AS (
    SELECT id FROM redrive_job WHERE id = %(id)s AND lease_token = %(token)s AND lease_expires_at > now() FOR SHARE
)
INSERT INTO redrive_outbox AS o (key, token, status, job_id, created_at, updated_at)
SELECT %(key)s, %(outbox_token)s, 'pending', id, now(), now() FROM fence
ON CONFLICT (key) DO UPDATE SET updated_at = o.updated_at
RETURNING o.*;

-- name: outbox_update
WITH fence AS (
    SELECT id FROM redrive_job WHERE id = %(id)s AND lease_token = %(token)s AND lease_expires_at > now() FOR SHARE
)
UPDATE redrive_outbox AS o
SET status = %(status)s,
    provider_id = CASE WHEN %(provider_id)s::text = '' THEN NULL
                       ELSE coalesce(%(provider_id)s::text, o.provider_id) END,
    notified_at = CASE WHEN %(notified)s::boolean THEN now()
                       WHEN NOT %(notified)s::boolean THEN NULL
                       ELSE o.notified_at END,
    error_code = %(error_code)s, error_message = %(error_message)s,
    sends = o.sends + %(send_started)s::int, reconciliations = o.reconciliations + %(reconciled)s::int,
    job_id = %(id)s, updated_at = now()
FROM fence
WHERE o.key = %(key)s
RETURNING o.*;

-- name: schedule_checkpoint
WITH created AS (
    INSERT INTO redrive_schedule (name, fired_until, updated_at) VALUES (%(name)s, %(now)s, now())
    ON CONFLICT (name) DO NOTHING
    RETURNING fired_until
)
SELECT fired_until FROM created
UNION ALL
SELECT fired_until FROM redrive_schedule WHERE name = %(name)s AND NOT EXISTS (SELECT 1 FROM created);

-- name: schedule_advance
UPDATE redrive_schedule SET fired_until = greatest(fired_until, %(to)s), updated_at = now()
WHERE name = %(name)s;

-- name: worker_report
WITH forgotten AS (
    DELETE FROM redrive_worker
    WHERE heartbeat_at < now() - make_interval(secs => %(forget_after_s)s) AND id <> %(id)s
)
INSERT INTO redrive_worker (id, host, pid, queues, concurrency, version, running, detail, started_at,
                            heartbeat_at)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s, %(concurrency)s, %(version)s, %(running)s, %(detail)s, now(), now())
ON CONFLICT (id) DO UPDATE SET running = excluded.running, detail = excluded.detail,
    heartbeat_at = excluded.heartbeat_at;

-- name: worker_remove
DELETE FROM redrive_worker WHERE id = %(id)s;

-- name: rollups_fold
-- Rows older than :before become rows :grain_s wide on shard 0, added to
-- what such a row holds already. The DELETE feeds the INSERT, so two folds at
-- once move each row once (the second waits, then finds it gone) and an
-- ending added to a row meanwhile moves with it.
WITH moved AS (
    DELETE FROM redrive_rollup
    WHERE at < %(before)s AND (shard <> 0 OR at %% %(grain_s)s <> 0)
    RETURNING at / %(grain_s)s * %(grain_s)s AS at, queue, task, kind, bucket, n
)
INSERT INTO redrive_rollup AS r (at, queue, task, shard, kind, bucket, n)
SELECT at, queue, task, 0, kind, bucket, sum(n) FROM moved
GROUP BY at, queue, task, kind, bucket
ORDER BY at, queue, task, kind, bucket
ON CONFLICT (at, queue, task, shard, kind, bucket) DO UPDATE SET n = r.n + excluded.n;
