-- The job whose successful ending created a workflow (redrive.spawn), so a
-- workflow's page can lead back to it.
ALTER TABLE redrive_workflow ADD COLUMN spawned_by uuid;
