-- A running job's latest progress; see the PostgreSQL migration 0030.
CREATE TABLE redrive_progress (
    job_id TEXT PRIMARY KEY,
    at     REAL NOT NULL,
    value  TEXT NOT NULL
);
