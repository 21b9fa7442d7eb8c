-- Rollups (core/rollups.py): endings per minute, queue, task, kind and
-- duration (or wait) bucket, added to in the transaction of each ending so
-- charts never scan history and outlive its pruning. One writer: shard is 0.
CREATE TABLE redrive_rollup (
    at INTEGER NOT NULL,  -- seconds since the epoch
    queue TEXT NOT NULL,
    task TEXT NOT NULL,
    shard INTEGER NOT NULL,
    kind TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (at, queue, task, shard, kind, bucket)
) WITHOUT ROWID;
