-- A running job's latest progress (redrive.progress), written at most once a
-- second per job, fenced on its lease; kept after it ends, gone when it is pruned.
CREATE TABLE redrive_progress (
    job_id uuid PRIMARY KEY,
    at     timestamptz NOT NULL,
    value  jsonb NOT NULL
);
