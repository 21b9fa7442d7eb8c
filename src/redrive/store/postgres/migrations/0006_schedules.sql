-- How far each schedule has been fired. Schedulers need no leader: each firing
-- is enqueued under a deterministic key, and this only bounds what they compute.

CREATE TABLE redrive_schedule (
    name        text PRIMARY KEY,
    fired_until timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
