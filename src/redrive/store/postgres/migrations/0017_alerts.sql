-- The alert rules that fire now, one row per rule while it fires: the
-- evaluator reads them at each round and starts or ends an incident with a
-- conditional write, so a restarted evaluator does not notify a rule that
-- was already firing, and two evaluators at once notify each change once.
CREATE TABLE redrive_alert (
    rule       text PRIMARY KEY,
    incident   text NOT NULL,
    detail     text NOT NULL,
    fired_at   timestamptz NOT NULL
);
