-- The jobs list filtered to failed or cancelled history, newest first,
-- without walking past every success: only those rows are in it, so the
-- common ending (a success) writes no entry.
CREATE INDEX redrive_job_done_unsucceeded ON redrive_job_done (created_at, id) WHERE status <> 'succeeded';
-- Dead letters counted as they open and close (a trigger: every path that
-- writes a letter keeps it right), by task, error class, stage and whether
-- replayed, so the dead letters page and the redrive_dead_letters_open gauge
-- answer from a handful of rows at any number of letters. Failures only: a
-- success never fires it.
CREATE TABLE redrive_dead_letter_tally (
    task text NOT NULL,
    error_class text NOT NULL,
    stage text NOT NULL,  -- '' for a letter without a stage
    replayed boolean NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (task, error_class, stage, replayed)
);
INSERT INTO redrive_dead_letter_tally (task, error_class, stage, replayed, n)
SELECT task, error_class, coalesce(stage, ''), replayed_at IS NOT NULL, count(*) FROM redrive_dead_letter
GROUP BY 1, 2, 3, 4;
CREATE FUNCTION redrive_dead_letter_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE redrive_dead_letter_tally SET n = n - 1
        WHERE task = OLD.task AND error_class = OLD.error_class AND stage = coalesce(OLD.stage, '')
          AND replayed = (OLD.replayed_at IS NOT NULL);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO redrive_dead_letter_tally AS t (task, error_class, stage, replayed, n)
        VALUES (NEW.task, NEW.error_class, coalesce(NEW.stage, ''), NEW.replayed_at IS NOT NULL, 1)
        ON CONFLICT (task, error_class, stage, replayed) DO UPDATE SET n = t.n + 1;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER redrive_dead_letter_count
    AFTER INSERT OR DELETE OR UPDATE OF replayed_at, task, error_class, stage ON redrive_dead_letter
    FOR EACH ROW EXECUTE FUNCTION redrive_dead_letter_count();
