-- Same shape as the PostgreSQL schema. Times are REAL seconds since the Unix
-- epoch (UTC), ids and lease tokens are 32-hex-digit TEXT, JSON is TEXT.

CREATE TABLE redrive_job (
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
    CONSTRAINT redrive_job_status CHECK (status IN ('scheduled', 'queued', 'running')),
    CONSTRAINT redrive_job_attempts CHECK (attempts >= 0 AND max_attempts >= 1),
    CONSTRAINT redrive_job_lease CHECK (
        (status = 'running') = (lease_token IS NOT NULL)
        AND (lease_token IS NULL) = (lease_owner IS NULL)
        AND (lease_token IS NULL) = (lease_expires_at IS NULL)),
    CONSTRAINT redrive_job_unfinished CHECK (
        result IS NULL AND error_code IS NULL AND error_message IS NULL
        AND finished_at IS NULL AND failed_at IS NULL)
) WITHOUT ROWID;

CREATE INDEX redrive_job_due ON redrive_job (priority, run_at)
    WHERE status IN ('scheduled', 'queued');
CREATE INDEX redrive_job_lease_expiry ON redrive_job (lease_expires_at)
    WHERE status = 'running';

CREATE TABLE redrive_job_done (
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
    CONSTRAINT redrive_job_done_status CHECK (status IN ('succeeded', 'failed', 'cancelled')),
    CONSTRAINT redrive_job_done_attempts CHECK (attempts >= 0 AND max_attempts >= 1),
    CONSTRAINT redrive_job_done_lease CHECK (
        lease_token IS NULL AND lease_owner IS NULL AND lease_expires_at IS NULL),
    CONSTRAINT redrive_job_done_result CHECK (result IS NULL OR status = 'succeeded'),
    CONSTRAINT redrive_job_done_error CHECK (
        (status = 'failed') = (error_code IS NOT NULL)
        AND (error_code IS NULL) = (error_message IS NULL)
        AND (status = 'failed') = (failed_at IS NOT NULL)),
    CONSTRAINT redrive_job_done_finished CHECK (finished_at IS NOT NULL)
) WITHOUT ROWID;

CREATE INDEX redrive_job_done_finished_at ON redrive_job_done (finished_at);

CREATE TABLE redrive_job_event (
    id          INTEGER PRIMARY KEY,
    job_id      TEXT NOT NULL,
    at          REAL NOT NULL,
    from_status TEXT,
    to_status   TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    meta        TEXT NOT NULL DEFAULT '{}'
);

CREATE INDEX redrive_job_event_job ON redrive_job_event (job_id, id);
