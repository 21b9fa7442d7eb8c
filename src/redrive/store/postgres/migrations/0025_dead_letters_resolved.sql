-- A dead letter can be resolved: an operator closes it without running its
-- job again (handled by hand, or not worth retrying). It is no longer open:
-- it leaves the open count and the gauge, and its job may be pruned. A letter
-- is closed once, by a replay or by a resolve.
ALTER TABLE redrive_dead_letter
    ADD COLUMN resolved_at timestamptz,
    ADD COLUMN resolved_by text,
    ADD CONSTRAINT redrive_dead_letter_closed_once CHECK (replayed_at IS NULL OR resolved_at IS NULL);
DROP INDEX redrive_dead_letter_open;
CREATE INDEX redrive_dead_letter_open ON redrive_dead_letter (last_failure_at)
    WHERE replayed_at IS NULL AND resolved_at IS NULL;
-- The tally (migration 0024) counts by state now: open, replayed or resolved.
DROP TRIGGER redrive_dead_letter_count ON redrive_dead_letter;
DROP FUNCTION redrive_dead_letter_count();
DROP TABLE redrive_dead_letter_tally;
CREATE FUNCTION redrive_dead_letter_state(replayed_at timestamptz, resolved_at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN replayed_at IS NOT NULL THEN 'replayed'
                WHEN resolved_at IS NOT NULL THEN 'resolved' ELSE 'open' END
$$;
CREATE TABLE redrive_dead_letter_tally (
    task text NOT NULL,
    error_class text NOT NULL,
    stage text NOT NULL,  -- '' for a letter without a stage
    state text NOT NULL,  -- open, replayed or resolved
    n bigint NOT NULL,
    PRIMARY KEY (task, error_class, stage, state)
);
INSERT INTO redrive_dead_letter_tally (task, error_class, stage, state, n)
SELECT task, error_class, coalesce(stage, ''), redrive_dead_letter_state(replayed_at, resolved_at), count(*)
FROM redrive_dead_letter
GROUP BY 1, 2, 3, 4;
CREATE FUNCTION redrive_dead_letter_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE redrive_dead_letter_tally SET n = n - 1
        WHERE task = OLD.task AND error_class = OLD.error_class AND stage = coalesce(OLD.stage, '')
          AND state = redrive_dead_letter_state(OLD.replayed_at, OLD.resolved_at);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO redrive_dead_letter_tally AS t (task, error_class, stage, state, n)
        VALUES (NEW.task, NEW.error_class, coalesce(NEW.stage, ''),
                redrive_dead_letter_state(NEW.replayed_at, NEW.resolved_at), 1)
        ON CONFLICT (task, error_class, stage, state) DO UPDATE SET n = t.n + 1;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER redrive_dead_letter_count
    AFTER INSERT OR DELETE OR UPDATE OF replayed_at, resolved_at, task, error_class, stage
    ON redrive_dead_letter
    FOR EACH ROW EXECUTE FUNCTION redrive_dead_letter_count();
