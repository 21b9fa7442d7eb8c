-- Jobs live in two tables with the same columns: redrive_job holds what may
-- still run (the claim reads only it, so it stays small) and redrive_job_done
-- holds finished jobs until retention prunes them.

CREATE TABLE redrive_job (
    id                 uuid PRIMARY KEY,
    task               text NOT NULL,
    queue              text NOT NULL,
    args               jsonb NOT NULL,
    kwargs             jsonb NOT NULL,
    status             text NOT NULL,
    priority           smallint NOT NULL,
    run_at             timestamptz NOT NULL,
    attempts           integer NOT NULL,
    max_attempts       integer NOT NULL,
    owner              text,
    lease_token        uuid,
    lease_owner        text,
    lease_expires_at   timestamptz,
    last_error_code    text,
    last_error_message text,
    error_code         text,
    error_message      text,
    result             jsonb,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    started_at         timestamptz,
    finished_at        timestamptz,
    failed_at          timestamptz,
    CONSTRAINT redrive_job_status CHECK (status IN ('scheduled', 'queued', 'running')),
    CONSTRAINT redrive_job_attempts CHECK (attempts >= 0 AND max_attempts >= 1),
    -- lease fields only when running, and always when running
    CONSTRAINT redrive_job_lease CHECK (
        (status = 'running') = (lease_token IS NOT NULL)
        AND (lease_token IS NULL) = (lease_owner IS NULL)
        AND (lease_token IS NULL) = (lease_expires_at IS NULL)),
    -- a result only when succeeded, an error only when failed: never here
    CONSTRAINT redrive_job_unfinished CHECK (
        result IS NULL AND error_code IS NULL AND error_message IS NULL
        AND finished_at IS NULL AND failed_at IS NULL)
);

CREATE INDEX redrive_job_due ON redrive_job (priority, run_at)
    WHERE status IN ('scheduled', 'queued');
CREATE INDEX redrive_job_lease_expiry ON redrive_job (lease_expires_at)
    WHERE status = 'running';

CREATE TABLE redrive_job_done (
    LIKE redrive_job INCLUDING DEFAULTS,
    PRIMARY KEY (id),
    CONSTRAINT redrive_job_done_status CHECK (status IN ('succeeded', 'failed', 'cancelled')),
    CONSTRAINT redrive_job_done_attempts CHECK (attempts >= 0 AND max_attempts >= 1),
    CONSTRAINT redrive_job_done_lease CHECK (
        lease_token IS NULL AND lease_owner IS NULL AND lease_expires_at IS NULL),
    CONSTRAINT redrive_job_done_result CHECK (result IS NULL OR status = 'succeeded'),
    CONSTRAINT redrive_job_done_error CHECK (
        (status = 'failed') = (error_code IS NOT NULL)
        AND (error_code IS NULL) = (error_message IS NULL)
        AND (status = 'failed') = (failed_at IS NOT NULL)),
    CONSTRAINT redrive_job_done_finished CHECK (finished_at IS NOT NULL)
);

CREATE INDEX redrive_job_done_finished_at ON redrive_job_done (finished_at);

CREATE TABLE redrive_job_event (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      uuid NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    from_status text,
    to_status   text NOT NULL,
    attempt     integer NOT NULL,
    meta        jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX redrive_job_event_job ON redrive_job_event (job_id, id);
