-- A workflow's steps not yet ended, counted on its row, so the ending of
-- its last step knows it (see the PostgreSQL migration 0029).
ALTER TABLE redrive_workflow ADD COLUMN open_steps INTEGER NOT NULL DEFAULT 0;
UPDATE redrive_workflow SET open_steps = (
    SELECT count(*) FROM redrive_step AS s JOIN redrive_job AS j ON j.id = s.job_id
    WHERE s.workflow_id = redrive_workflow.id);
