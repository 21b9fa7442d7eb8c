-- The audit trail: who looked at what an operator may reveal (a job's
-- original arguments) or did outside a job's own history. It outlives
-- pruning on purpose: what someone saw stays on record.
CREATE TABLE redrive_audit (
    id      bigserial PRIMARY KEY,
    at      timestamptz NOT NULL,
    by      text NOT NULL,
    action  text NOT NULL,
    job_id  uuid,
    detail  jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX redrive_audit_job ON redrive_audit (job_id, id);
