-- Waiting jobs by queue and state, oldest due first: the queue counts read
-- each queue's first entry (its oldest due job) and count at most a cap of
-- entries, never every waiting job (queues_stats).
CREATE INDEX redrive_job_waiting ON redrive_job (queue, status, run_at)
    WHERE status IN ('scheduled', 'queued');
