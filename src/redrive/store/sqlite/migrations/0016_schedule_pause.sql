-- An operator may pause a schedule: its firings are skipped until it is resumed.
ALTER TABLE redrive_schedule ADD COLUMN paused_by TEXT;
