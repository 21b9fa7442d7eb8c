-- SQLiteStore's named queries (store/sql.py reads every file here).
-- Parameters: :name. Times are REAL epoch seconds; the store reads "now"
-- from SQLite once per transaction.
--
-- The schema's own: the clock, and the migrations' bookkeeping.

-- name: now
SELECT (julianday('now') - 2440587.5) * 86400.0 AS now;

-- name: migration_table_create
CREATE TABLE IF NOT EXISTS redrive_migration (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
);

-- name: migration_version
SELECT coalesce(max(version), 0) AS version FROM redrive_migration;

-- name: migration_table_exists
SELECT count(*) AS present FROM sqlite_master WHERE type = 'table' AND name = 'redrive_migration';

-- name: migration_record
INSERT INTO redrive_migration (version, name) VALUES (:version, :name);

-- name: schema_present
-- Whether a connection of the caller's is to a database redrive uses.
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'redrive_job';
