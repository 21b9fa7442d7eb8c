-- Workflows; see the PostgreSQL migration 0027. SQLite cannot change a
-- CHECK constraint in place, so the hot table is rebuilt with the two new
-- statuses (pending, blocked): same columns in the same order, same indexes.
CREATE TABLE redrive_job_next (
    id                 TEXT PRIMARY KEY,
    task               TEXT NOT NULL,
    queue              TEXT NOT NULL,
    args               TEXT NOT NULL,
    kwargs             TEXT NOT NULL,
    status             TEXT NOT NULL,
    priority           INTEGER NOT NULL,
    run_at             REAL NOT NULL,
    attempts           INTEGER NOT NULL,
    max_attempts       INTEGER NOT NULL,
    owner              TEXT,
    lease_token        TEXT,
    lease_owner        TEXT,
    lease_expires_at   REAL,
    last_error_code    TEXT,
    last_error_message TEXT,
    error_code         TEXT,
    error_message      TEXT,
    result             TEXT,
    created_at         REAL NOT NULL,
    updated_at         REAL NOT NULL,
    started_at         REAL,
    finished_at        REAL,
    failed_at          REAL,
    stage              TEXT,
    stage_attempts     TEXT NOT NULL DEFAULT '{}',
    checkpoint         TEXT NOT NULL DEFAULT '{}',
    manual_retry_count INTEGER NOT NULL DEFAULT 0,
    first_failed_at    REAL,
    dependencies       TEXT NOT NULL DEFAULT '[]',
    idempotency_key    TEXT,
    version            INTEGER NOT NULL DEFAULT 1,
    CONSTRAINT redrive_job_status CHECK (status IN ('pending', 'blocked', 'scheduled', 'queued', 'running')),
    CONSTRAINT redrive_job_attempts CHECK (attempts >= 0 AND max_attempts >= 1),
    CONSTRAINT redrive_job_lease CHECK (
        (status = 'running') = (lease_token IS NOT NULL)
        AND (lease_token IS NULL) = (lease_owner IS NULL)
        AND (lease_token IS NULL) = (lease_expires_at IS NULL)),
    CONSTRAINT redrive_job_unfinished CHECK (
        result IS NULL AND error_code IS NULL AND error_message IS NULL
        AND finished_at IS NULL AND failed_at IS NULL)
) WITHOUT ROWID;
INSERT INTO redrive_job_next SELECT * FROM redrive_job;
DROP TABLE redrive_job;
ALTER TABLE redrive_job_next RENAME TO redrive_job;
CREATE INDEX redrive_job_due ON redrive_job (priority, run_at)
    WHERE status IN ('scheduled', 'queued');
CREATE INDEX redrive_job_lease_expiry ON redrive_job (lease_expires_at)
    WHERE status = 'running';
CREATE INDEX redrive_job_created ON redrive_job (created_at, id);
CREATE INDEX redrive_job_waiting ON redrive_job (queue, status, run_at)
    WHERE status IN ('scheduled', 'queued');
CREATE INDEX redrive_job_owner ON redrive_job (owner, created_at, id) WHERE owner IS NOT NULL;

CREATE TABLE redrive_workflow (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    owner        TEXT,
    key          TEXT,
    graph        TEXT NOT NULL,
    created_at   REAL NOT NULL,
    cancelled_at REAL,
    cancelled_by TEXT
);
CREATE UNIQUE INDEX redrive_workflow_key ON redrive_workflow (coalesce(owner, ''), key) WHERE key IS NOT NULL;

CREATE TABLE redrive_step (
    job_id      TEXT PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    name        TEXT NOT NULL,
    position    INTEGER,
    waiting     INTEGER NOT NULL CHECK (waiting >= 0),
    blocking    INTEGER NOT NULL DEFAULT 0 CHECK (blocking >= 0)
) WITHOUT ROWID;
CREATE INDEX redrive_step_workflow ON redrive_step (workflow_id, name, position);

CREATE TABLE redrive_edge (
    parent_id TEXT NOT NULL,
    child_id  TEXT NOT NULL,
    policy    TEXT NOT NULL CHECK (policy IN ('succeeded', 'not_failed', 'ended')),
    state     TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'satisfied', 'blocking')),
    PRIMARY KEY (parent_id, child_id)
) WITHOUT ROWID;
CREATE INDEX redrive_edge_child ON redrive_edge (child_id);
