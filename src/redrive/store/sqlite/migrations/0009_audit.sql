-- The audit trail; see the PostgreSQL migration.
CREATE TABLE redrive_audit (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      REAL NOT NULL,
    by      TEXT NOT NULL,
    action  TEXT NOT NULL,
    job_id  TEXT,
    detail  TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX redrive_audit_job ON redrive_audit (job_id, id);
