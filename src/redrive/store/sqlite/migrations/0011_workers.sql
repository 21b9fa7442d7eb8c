-- Workers you can see; see the PostgreSQL migration.
CREATE TABLE redrive_worker (
    id            TEXT PRIMARY KEY,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    queues        TEXT NOT NULL,
    concurrency   INTEGER NOT NULL,
    version       TEXT NOT NULL,
    running       INTEGER NOT NULL,
    started_at    REAL NOT NULL,
    heartbeat_at  REAL NOT NULL
);
