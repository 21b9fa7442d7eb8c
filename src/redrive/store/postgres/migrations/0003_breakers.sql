-- Circuit breakers shared by every worker, and the dependencies a job needs.

ALTER TABLE redrive_job ADD COLUMN dependencies jsonb NOT NULL DEFAULT '[]';
ALTER TABLE redrive_job_done ADD COLUMN dependencies jsonb NOT NULL DEFAULT '[]';

CREATE TABLE redrive_breaker (
    name       text PRIMARY KEY,
    state      text NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    data       jsonb NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE redrive_breaker_event (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text NOT NULL,
    at         timestamptz NOT NULL,
    from_state text NOT NULL,
    to_state   text NOT NULL,
    reason     text NOT NULL,
    by         text
);

CREATE INDEX redrive_breaker_event_name ON redrive_breaker_event (name, id);
