-- What every worker obeys; see the PostgreSQL migration.
CREATE TABLE redrive_cancel_request (
    job_id  TEXT PRIMARY KEY,
    by      TEXT NOT NULL,
    at      REAL NOT NULL
);

CREATE TABLE redrive_queue_pause (
    queue   TEXT PRIMARY KEY,
    by      TEXT NOT NULL,
    at      REAL NOT NULL
);

CREATE TABLE redrive_permit (
    key          TEXT NOT NULL,
    job_id       TEXT NOT NULL,
    lease_token  TEXT NOT NULL,
    at           REAL NOT NULL
);
CREATE INDEX redrive_permit_key ON redrive_permit (key, at);
