-- Who waits for which job's result. A job's ending notifies on redrive_done
-- only when someone waits for it, so while nobody does, completion costs one
-- probe of this (empty) table and no NOTIFY. UNLOGGED: a crash forgets the
-- waiters, and a waiter re-reads its job anyway (the notification is a hint).
CREATE UNLOGGED TABLE redrive_result_waiter (
    job_id  uuid NOT NULL,
    waiter  uuid NOT NULL,
    since   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, waiter)
);
