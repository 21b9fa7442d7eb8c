-- The jobs list filtered to failed or cancelled history, newest first,
-- without walking past every success (a success writes no entry).
CREATE INDEX redrive_job_done_unsucceeded ON redrive_job_done (created_at, id) WHERE status <> 'succeeded';
-- The open dead letters' facets and gauges, from the index alone.
CREATE INDEX redrive_dead_letter_open_facets ON redrive_dead_letter (task, error_class, stage)
    WHERE replayed_at IS NULL;
