-- PostgresStore's named queries (store/sql.py reads every file here): each is
-- one statement, so it is atomic on an autocommit connection and costs one
-- round trip. Parameters: %(name)s.
--
-- The schema's own: the clock, and the migrations' bookkeeping.

-- name: now
SELECT now() AS now;

-- name: migration_lock
SELECT pg_advisory_xact_lock(7210143151);

-- name: migration_table_create
CREATE TABLE IF NOT EXISTS redrive_migration (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: migration_version
SELECT coalesce(max(version), 0) AS version FROM redrive_migration;

-- name: migration_table_exists
SELECT to_regclass('redrive_migration') IS NOT NULL AS present;

-- name: migration_record
INSERT INTO redrive_migration (version, name) VALUES (%(version)s, %(name)s);

-- name: schema_present
-- Whether a connection of the caller's is to a database redrive uses.
SELECT to_regclass('redrive_job') IS NOT NULL AS present;
