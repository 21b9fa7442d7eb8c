-- The alert rules that fire now; see the PostgreSQL migration.
CREATE TABLE redrive_alert (
    rule       TEXT PRIMARY KEY,
    incident   TEXT NOT NULL,
    detail     TEXT NOT NULL,
    fired_at   REAL NOT NULL
);
