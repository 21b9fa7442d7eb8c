-- Workers you can see: each registers itself, renews its heartbeat every
-- few seconds with how many jobs it runs, and leaves when it stops cleanly.
-- One killed leaves its row; readers mark it stale, and it is forgotten a
-- day after its last heartbeat.
CREATE TABLE redrive_worker (
    id            text PRIMARY KEY,
    host          text NOT NULL,
    pid           integer NOT NULL,
    queues        jsonb NOT NULL,
    concurrency   integer NOT NULL,
    version       text NOT NULL,
    running       integer NOT NULL,
    started_at    timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL
);
