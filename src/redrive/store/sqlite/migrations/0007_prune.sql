-- Pruning history deletes the idempotency keys that point at the jobs it
-- removes; without this index each batch would scan every key.
CREATE INDEX redrive_job_key_job ON redrive_job_key (job_id);
