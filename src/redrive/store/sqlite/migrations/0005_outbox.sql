-- The outbox; see the PostgreSQL migration.

CREATE TABLE redrive_outbox (
    key             TEXT PRIMARY KEY,
    token           TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'sending', 'sent', 'failed')),
    provider_id     TEXT,
    notified_at     REAL,
    job_id          TEXT NOT NULL,
    sends           INTEGER NOT NULL DEFAULT 0,
    reconciliations INTEGER NOT NULL DEFAULT 0,
    error_code      TEXT,
    error_message   TEXT,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL
);

CREATE INDEX redrive_outbox_unsent ON redrive_outbox (status) WHERE status <> 'sent';
