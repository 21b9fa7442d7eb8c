-- Stages (where a job resumes, per-stage attempt counts, saved stage output),
-- manual retries, and the dead letters operators triage and replay.

ALTER TABLE redrive_job
    ADD COLUMN stage              text,
    ADD COLUMN stage_attempts     jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN checkpoint         jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN manual_retry_count integer NOT NULL DEFAULT 0,
    ADD COLUMN first_failed_at    timestamptz;

-- Same columns in the same order, so both tables still UNION ALL as one.
ALTER TABLE redrive_job_done
    ADD COLUMN stage              text,
    ADD COLUMN stage_attempts     jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN checkpoint         jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN manual_retry_count integer NOT NULL DEFAULT 0,
    ADD COLUMN first_failed_at    timestamptz;

CREATE TABLE redrive_dead_letter (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id           uuid NOT NULL,
    task             text NOT NULL,
    queue            text NOT NULL,
    owner            text,
    error_class      text NOT NULL,
    error_code       text NOT NULL,
    error_message    text NOT NULL,
    retryable        boolean NOT NULL,
    stage            text,
    stage_attempts   jsonb NOT NULL,
    attempts         integer NOT NULL,
    last_stack       text,
    context          jsonb NOT NULL,
    first_failure_at timestamptz NOT NULL,
    last_failure_at  timestamptz NOT NULL,
    escalated        boolean NOT NULL,
    previous_id      bigint REFERENCES redrive_dead_letter (id),
    replayed_at      timestamptz,
    replayed_by      text,
    replay_from      text,
    notes            jsonb NOT NULL DEFAULT '[]',
    CONSTRAINT redrive_dead_letter_replay CHECK (
        (replayed_at IS NULL) = (replay_from IS NULL)
        AND replay_from IN ('stage', 'start'))
);

CREATE INDEX redrive_dead_letter_job ON redrive_dead_letter (job_id, id);
CREATE INDEX redrive_dead_letter_open ON redrive_dead_letter (last_failure_at)
    WHERE replayed_at IS NULL;
