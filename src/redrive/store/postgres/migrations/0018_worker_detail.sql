-- What a worker says of itself beyond its slots: jobs run, memory, orphaned
-- threads; a supervisor's children name it, and it keeps its restarts and
-- why it replaced each child (store/port.py WorkerReport).
ALTER TABLE redrive_worker ADD COLUMN detail jsonb NOT NULL DEFAULT '{}';
