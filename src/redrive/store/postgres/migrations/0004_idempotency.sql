-- Idempotent enqueue. A job may carry an idempotency key and a version; which
-- run a key points at lives in its own table, because a unique index on the
-- jobs cannot span the two tables a job moves between.

ALTER TABLE redrive_job ADD COLUMN idempotency_key text, ADD COLUMN version integer NOT NULL DEFAULT 1;
ALTER TABLE redrive_job_done ADD COLUMN idempotency_key text, ADD COLUMN version integer NOT NULL DEFAULT 1;

CREATE TABLE redrive_job_key (
    task        text NOT NULL,
    owner       text NOT NULL,          -- '' for jobs without an owner
    key         text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('key', 'content')),
    version     integer NOT NULL CHECK (version >= 1),
    job_id      uuid NOT NULL,          -- the run of the newest version
    fingerprint text NOT NULL,          -- hash of that run's arguments
    nonce       uuid NOT NULL,          -- which enqueue wrote this row last
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (task, owner, key)
);
