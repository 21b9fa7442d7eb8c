-- A dead letter can be resolved: an operator closes it without running its
-- job again. It is no longer open (the open count, the gauge, pruning its
-- job). A letter is closed once, by a replay or by a resolve: the store's
-- writes only close an open letter (SQLite cannot add a CHECK to a table).
ALTER TABLE redrive_dead_letter ADD COLUMN resolved_at REAL;
ALTER TABLE redrive_dead_letter ADD COLUMN resolved_by TEXT;
DROP INDEX redrive_dead_letter_open;
CREATE INDEX redrive_dead_letter_open ON redrive_dead_letter (last_failure_at)
    WHERE replayed_at IS NULL AND resolved_at IS NULL;
-- The tally (migration 0019) counts by state now: open, replayed or resolved.
DROP TRIGGER redrive_dead_letter_opened;
DROP TRIGGER redrive_dead_letter_gone;
DROP TRIGGER redrive_dead_letter_changed;
DROP TABLE redrive_dead_letter_tally;
CREATE TABLE redrive_dead_letter_tally (
    task TEXT NOT NULL,
    error_class TEXT NOT NULL,
    stage TEXT NOT NULL,  -- '' for a letter without a stage
    state TEXT NOT NULL,  -- open, replayed or resolved
    n INTEGER NOT NULL,
    PRIMARY KEY (task, error_class, stage, state)
) WITHOUT ROWID;
INSERT INTO redrive_dead_letter_tally (task, error_class, stage, state, n)
SELECT task, error_class, coalesce(stage, ''),
       CASE WHEN replayed_at IS NOT NULL THEN 'replayed' WHEN resolved_at IS NOT NULL THEN 'resolved' ELSE 'open' END,
       count(*)
FROM redrive_dead_letter
GROUP BY 1, 2, 3, 4;
CREATE TRIGGER redrive_dead_letter_opened AFTER INSERT ON redrive_dead_letter
BEGIN
    INSERT INTO redrive_dead_letter_tally (task, error_class, stage, state, n)
    VALUES (NEW.task, NEW.error_class, coalesce(NEW.stage, ''),
            CASE WHEN NEW.replayed_at IS NOT NULL THEN 'replayed'
                 WHEN NEW.resolved_at IS NOT NULL THEN 'resolved' ELSE 'open' END, 1)
    ON CONFLICT (task, error_class, stage, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER redrive_dead_letter_gone AFTER DELETE ON redrive_dead_letter
BEGIN
    UPDATE redrive_dead_letter_tally SET n = n - 1
    WHERE task = OLD.task AND error_class = OLD.error_class AND stage = coalesce(OLD.stage, '')
      AND state = CASE WHEN OLD.replayed_at IS NOT NULL THEN 'replayed'
                       WHEN OLD.resolved_at IS NOT NULL THEN 'resolved' ELSE 'open' END;
END;
CREATE TRIGGER redrive_dead_letter_changed
AFTER UPDATE OF replayed_at, resolved_at, task, error_class, stage ON redrive_dead_letter
BEGIN
    UPDATE redrive_dead_letter_tally SET n = n - 1
    WHERE task = OLD.task AND error_class = OLD.error_class AND stage = coalesce(OLD.stage, '')
      AND state = CASE WHEN OLD.replayed_at IS NOT NULL THEN 'replayed'
                       WHEN OLD.resolved_at IS NOT NULL THEN 'resolved' ELSE 'open' END;
    INSERT INTO redrive_dead_letter_tally (task, error_class, stage, state, n)
    VALUES (NEW.task, NEW.error_class, coalesce(NEW.stage, ''),
            CASE WHEN NEW.replayed_at IS NOT NULL THEN 'replayed'
                 WHEN NEW.resolved_at IS NOT NULL THEN 'resolved' ELSE 'open' END, 1)
    ON CONFLICT (task, error_class, stage, state) DO UPDATE SET n = n + 1;
END;
