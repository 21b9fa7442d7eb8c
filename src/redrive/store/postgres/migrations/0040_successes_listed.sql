-- A batch of successes comes to jobs_finish as lists in text, one a field
-- (codecs._successes): PostgreSQL reads a list of ids or of numbers in a
-- third of the time it takes the same batch apart as JSON objects, about
-- 2.4 µs of the server's CPU a job (bench/NOTES.md).
--
-- This reads them as rows, in their order. It is a function, and STRICT, so
-- that PostgreSQL never inlines it and plans the 1 row its ROWS says: a
-- worker keeps its plan of jobs_finish for as long as its connection lives,
-- and a plan made generic while the table held a few hundred jobs must still
-- find each job through the primary key (a join on the lists alone was
-- planned as a scan of the table: tests/store/test_postgres_finish_plan.py).
-- An empty field reads as NULL (a run without a wait).
CREATE FUNCTION redrive_successes(ids text, tokens text, ns text, dur_b text, wait_b text, dur_ms text,
                                  wait_ms text)
RETURNS TABLE (id uuid, token uuid, n int, dur_b int, wait_b int, dur_ms int, wait_ms int, o int)
LANGUAGE sql IMMUTABLE STRICT ROWS 1
AS $$
    SELECT u.id, u.token, u.n, u.dur_b, u.wait_b, u.dur_ms, u.wait_ms, u.o::int
    FROM unnest(string_to_array(ids, ',')::uuid[], string_to_array(tokens, ',')::uuid[],
                string_to_array(ns, ',')::int[], string_to_array(dur_b, ',', '')::int[],
                string_to_array(wait_b, ',', '')::int[], string_to_array(dur_ms, ',', '')::int[],
                string_to_array(wait_ms, ',', '')::int[])
         WITH ORDINALITY AS u(id, token, n, dur_b, wait_b, dur_ms, wait_ms, o)
$$;
