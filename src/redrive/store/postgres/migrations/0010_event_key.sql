-- Events are only ever read by job. Their key becomes (job_id, id), the index
-- those reads already used; a unique index on id alone cost one more index
-- write for each of the two or three events every job writes.
CREATE UNIQUE INDEX redrive_job_event_key ON redrive_job_event (job_id, id);
ALTER TABLE redrive_job_event DROP CONSTRAINT redrive_job_event_pkey;
ALTER TABLE redrive_job_event ADD CONSTRAINT redrive_job_event_pkey PRIMARY KEY USING INDEX redrive_job_event_key;
DROP INDEX redrive_job_event_job;
