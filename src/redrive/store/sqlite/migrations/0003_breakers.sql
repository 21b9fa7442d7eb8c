-- Circuit breakers shared by every worker; see the PostgreSQL migration.

ALTER TABLE redrive_job ADD COLUMN dependencies TEXT NOT NULL DEFAULT '[]';
ALTER TABLE redrive_job_done ADD COLUMN dependencies TEXT NOT NULL DEFAULT '[]';

CREATE TABLE redrive_breaker (
    name       TEXT PRIMARY KEY,
    state      TEXT NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    data       TEXT NOT NULL,
    updated_at REAL NOT NULL
);

CREATE TABLE redrive_breaker_event (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL,
    at         REAL NOT NULL,
    from_state TEXT NOT NULL,
    to_state   TEXT NOT NULL,
    reason     TEXT NOT NULL,
    by         TEXT
);

CREATE INDEX redrive_breaker_event_name ON redrive_breaker_event (name, id);
