-- Rollups (core/rollups.py): endings per minute, queue, task, kind and
-- duration (or wait) bucket, added to in the transaction of each ending so
-- charts never scan history and outlive its pruning. ``shard`` keeps two
-- connections off each other's rows; the compaction adds shards together,
-- then folds minutes into hours.
CREATE TABLE redrive_rollup (
    at bigint NOT NULL,  -- seconds since the epoch, as on SQLite: the two share their SQL (store/shared.sql)
    queue text NOT NULL,
    task text NOT NULL,
    shard smallint NOT NULL,
    kind text NOT NULL,
    bucket smallint NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (at, queue, task, shard, kind, bucket)
);
