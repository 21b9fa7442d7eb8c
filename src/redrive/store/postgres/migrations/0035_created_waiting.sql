-- The job list's newest-first index on the live table (migration 0019) no
-- longer holds running jobs: a claim writes a new version of the job's row
-- (not HOT: its status is in the other indexes' predicates), and each index
-- that takes that version writes an entry, about 110 bytes of WAL a job
-- here (bench/run dbcost). The list reads running jobs apart, through the
-- lease index, and sorts them: as many as the workers hold at once, where
-- waiting jobs may be a backlog of millions (store/shared.sql, jobs_page).
DROP INDEX redrive_job_created;
CREATE INDEX redrive_job_created ON redrive_job (created_at, id) WHERE status <> 'running';
