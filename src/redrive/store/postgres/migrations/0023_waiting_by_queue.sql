-- Waiting jobs by queue and state, oldest due first: the queue counts read
-- each queue's first entry (its oldest due job) and count at most a cap of
-- entries, never every waiting job (queues_stats). Running rows are not in
-- it, so a claim writes no entry; an enqueue or a retry writes one.
CREATE INDEX redrive_job_waiting ON redrive_job (queue, status, run_at)
    WHERE status IN ('scheduled', 'queued');
-- Beyond the cap the planner estimates a queue's count: let it know how
-- queues and states go together.
CREATE STATISTICS redrive_job_queue_status (mcv) ON queue, status FROM redrive_job;
