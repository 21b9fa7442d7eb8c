-- Stages, manual retries and dead letters; see the PostgreSQL migration.

ALTER TABLE redrive_job
    ADD COLUMN stage              TEXT;
ALTER TABLE redrive_job ADD COLUMN stage_attempts     TEXT NOT NULL DEFAULT '{}';
ALTER TABLE redrive_job ADD COLUMN checkpoint         TEXT NOT NULL DEFAULT '{}';
ALTER TABLE redrive_job ADD COLUMN manual_retry_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE redrive_job ADD COLUMN first_failed_at    REAL;

ALTER TABLE redrive_job_done
    ADD COLUMN stage              TEXT;
ALTER TABLE redrive_job_done ADD COLUMN stage_attempts     TEXT NOT NULL DEFAULT '{}';
ALTER TABLE redrive_job_done ADD COLUMN checkpoint         TEXT NOT NULL DEFAULT '{}';
ALTER TABLE redrive_job_done ADD COLUMN manual_retry_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE redrive_job_done ADD COLUMN first_failed_at    REAL;

CREATE TABLE redrive_dead_letter (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id           TEXT NOT NULL,
    task             TEXT NOT NULL,
    queue            TEXT NOT NULL,
    owner            TEXT,
    error_class      TEXT NOT NULL,
    error_code       TEXT NOT NULL,
    error_message    TEXT NOT NULL,
    retryable        INTEGER NOT NULL,
    stage            TEXT,
    stage_attempts   TEXT NOT NULL,
    attempts         INTEGER NOT NULL,
    last_stack       TEXT,
    context          TEXT NOT NULL,
    first_failure_at REAL NOT NULL,
    last_failure_at  REAL NOT NULL,
    escalated        INTEGER NOT NULL,
    previous_id      INTEGER REFERENCES redrive_dead_letter (id),
    replayed_at      REAL,
    replayed_by      TEXT,
    replay_from      TEXT,
    notes            TEXT NOT NULL DEFAULT '[]',
    CONSTRAINT redrive_dead_letter_replay CHECK (
        (replayed_at IS NULL) = (replay_from IS NULL)
        AND replay_from IN ('stage', 'start'))
);

CREATE INDEX redrive_dead_letter_job ON redrive_dead_letter (job_id, id);
CREATE INDEX redrive_dead_letter_open ON redrive_dead_letter (last_failure_at)
    WHERE replayed_at IS NULL;
