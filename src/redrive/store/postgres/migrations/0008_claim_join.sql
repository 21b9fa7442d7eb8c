-- The claim updates the jobs redrive_due picked by joining on id. A set-returning
-- function is estimated at 1000 rows, so on a table of tens of thousands of
-- jobs the planner hash-joined the batch against a scan of the whole table
-- (11 of 18 ms per claim of 500 with 30,000 queued). An estimate of a few rows
-- makes it look each picked job up by its primary key (docs/performance.md).
ALTER FUNCTION redrive_due(text[], integer, text[]) ROWS 10;
