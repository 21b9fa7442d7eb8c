-- Idempotent enqueue; see the PostgreSQL migration.

ALTER TABLE redrive_job ADD COLUMN idempotency_key TEXT;
ALTER TABLE redrive_job ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE redrive_job_done ADD COLUMN idempotency_key TEXT;
ALTER TABLE redrive_job_done ADD COLUMN version INTEGER NOT NULL DEFAULT 1;

CREATE TABLE redrive_job_key (
    task        TEXT NOT NULL,
    owner       TEXT NOT NULL,
    key         TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('key', 'content')),
    version     INTEGER NOT NULL CHECK (version >= 1),
    job_id      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    nonce       TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    PRIMARY KEY (task, owner, key)
);
