-- What a worker says of itself beyond its slots; see the PostgreSQL migration.
ALTER TABLE redrive_worker ADD COLUMN detail TEXT NOT NULL DEFAULT '{}';
