-- The jobs list filtered to failed or cancelled history, newest first,
-- without walking past every success (a success writes no entry).
CREATE INDEX redrive_job_done_unsucceeded ON redrive_job_done (created_at, id) WHERE status <> 'succeeded';
-- Dead letters counted as they open and close (triggers: every path that
-- writes a letter keeps it right), by task, error class, stage and whether
-- replayed, so the dead letters page and the redrive_dead_letters_open gauge
-- answer from a handful of rows.
CREATE TABLE redrive_dead_letter_tally (
    task TEXT NOT NULL,
    error_class TEXT NOT NULL,
    stage TEXT NOT NULL,  -- '' for a letter without a stage
    replayed INTEGER NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (task, error_class, stage, replayed)
) WITHOUT ROWID;
INSERT INTO redrive_dead_letter_tally (task, error_class, stage, replayed, n)
SELECT task, error_class, coalesce(stage, ''), replayed_at IS NOT NULL, count(*) FROM redrive_dead_letter
GROUP BY 1, 2, 3, 4;
CREATE TRIGGER redrive_dead_letter_opened AFTER INSERT ON redrive_dead_letter
BEGIN
    INSERT INTO redrive_dead_letter_tally (task, error_class, stage, replayed, n)
    VALUES (NEW.task, NEW.error_class, coalesce(NEW.stage, ''), NEW.replayed_at IS NOT NULL, 1)
    ON CONFLICT (task, error_class, stage, replayed) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER redrive_dead_letter_gone AFTER DELETE ON redrive_dead_letter
BEGIN
    UPDATE redrive_dead_letter_tally SET n = n - 1
    WHERE task = OLD.task AND error_class = OLD.error_class AND stage = coalesce(OLD.stage, '')
      AND replayed = (OLD.replayed_at IS NOT NULL);
END;
CREATE TRIGGER redrive_dead_letter_changed
AFTER UPDATE OF replayed_at, task, error_class, stage ON redrive_dead_letter
BEGIN
    UPDATE redrive_dead_letter_tally SET n = n - 1
    WHERE task = OLD.task AND error_class = OLD.error_class AND stage = coalesce(OLD.stage, '')
      AND replayed = (OLD.replayed_at IS NOT NULL);
    INSERT INTO redrive_dead_letter_tally (task, error_class, stage, replayed, n)
    VALUES (NEW.task, NEW.error_class, coalesce(NEW.stage, ''), NEW.replayed_at IS NOT NULL, 1)
    ON CONFLICT (task, error_class, stage, replayed) DO UPDATE SET n = n + 1;
END;
-- An owner's jobs newest first (what every owner's jobs page asks), in both
-- tables; jobs without an owner are not in it. SQLite cannot plan the
-- catch-all ``(:owner IS NULL OR owner = :owner)`` onto an index, so the
-- store asks with ``owner = :owner`` when an owner is given (jobs_page_owned).
CREATE INDEX redrive_job_owner ON redrive_job (owner, created_at, id) WHERE owner IS NOT NULL;
CREATE INDEX redrive_job_done_owner ON redrive_job_done (owner, created_at, id) WHERE owner IS NOT NULL;
