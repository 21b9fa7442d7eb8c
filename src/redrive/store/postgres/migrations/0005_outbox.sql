-- The outbox: one row per intended side effect, keyed by the application's
-- tuple. Its writes are fenced on the lease of the job making them.

CREATE TABLE redrive_outbox (
    key             text PRIMARY KEY,
    token           text NOT NULL,
    status          text NOT NULL CHECK (status IN ('pending', 'sending', 'sent', 'failed')),
    provider_id     text,
    notified_at     timestamptz,
    job_id          uuid NOT NULL,
    sends           integer NOT NULL DEFAULT 0,
    reconciliations integer NOT NULL DEFAULT 0,
    error_code      text,
    error_message   text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);

CREATE INDEX redrive_outbox_unsent ON redrive_outbox (status) WHERE status <> 'sent';
