-- Running jobs get an index of their own, on created_at as the job list reads
-- them (those created by one statement are sorted by id), in place of the
-- lease index on lease_expires_at. Its entries are as small as the lease
-- index's were, so a claim writes the same bytes.
--
-- A heartbeat extends each running job's lease every third of the lease
-- TTL. While lease_expires_at was indexed, every extension was a new version
-- of the row, with an entry in the primary key and one in the lease index:
-- about 530 bytes of WAL a running job each time (bench/run dbcost), so a
-- job running a minute wrote more for its heartbeats than for the rest of
-- its life. Now an extension changes no indexed column, and with the room
-- migration 0037 leaves on each page it is a HOT update: one small record,
-- no index entry. A stage's saved output is HOT the same way.
--
-- The reclaim now reads every running job and keeps the expired ones. That
-- is as many jobs as the workers hold at once, which the job list and the
-- queue overview already read (store/shared.sql, jobs_page). The job list's
-- running jobs come from this index in their order, a page at a time.
CREATE INDEX redrive_job_running ON redrive_job (created_at) WHERE status = 'running';
DROP INDEX redrive_job_lease_expiry;
