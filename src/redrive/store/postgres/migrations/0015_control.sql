-- What every worker obeys, read by each about twice a second.
-- A cancel asked of a running job waits here until its worker ends the job
-- (or the job ends otherwise); a paused queue is claimed by no worker.
CREATE TABLE redrive_cancel_request (
    job_id  uuid PRIMARY KEY,
    by      text NOT NULL,
    at      timestamptz NOT NULL
);

CREATE TABLE redrive_queue_pause (
    queue   text PRIMARY KEY,
    by      text NOT NULL,
    at      timestamptz NOT NULL
);

-- Limits shared by every worker (core/limits.py): a permit per started job
-- and key, held while the job runs under that lease and, for rates, kept for
-- the longest rate window.
CREATE TABLE redrive_permit (
    key          text NOT NULL,
    job_id       uuid NOT NULL,
    lease_token  uuid NOT NULL,
    at           timestamptz NOT NULL
);
CREATE INDEX redrive_permit_key ON redrive_permit (key, at);
