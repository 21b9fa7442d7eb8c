-- How far each schedule has been fired; see the PostgreSQL migration.

CREATE TABLE redrive_schedule (
    name        TEXT PRIMARY KEY,
    fired_until REAL NOT NULL,
    updated_at  REAL NOT NULL
);
