-- A claim with limits reads its candidates and the permits of their keys
-- without a lock, and the worker works out each key's room (core/limits.py).
-- Then one statement takes the limits' lock (held to its commit, never across
-- a round trip), picks in order the candidates whose every key has room
-- (redrive_limits_pick), each key's room less the starts other claims made
-- there since the read, and claims the first of those still waiting, with
-- their permits.
--
-- Permits are written only under the lock, one claim after another, so their
-- seq is in the order they were committed: a read saw every permit up to the
-- largest seq it saw, and none after.
ALTER TABLE redrive_permit ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
DROP INDEX redrive_permit_key;
CREATE INDEX redrive_permit_key ON redrive_permit (key, seq);

-- ids: the candidates in the claim's order; sets[set_of[i]]: the places in
-- keys of the keys candidate i counts against (0 past its last: most jobs
-- share a few such sets); rooms[k]: how many starts keys[k] could take by the
-- read; seen: the read's largest seq.
-- Answers, in order, at most ``most`` candidates that fit, each counted
-- against its keys' rooms as core/limits.py's pick counts: the claim takes
-- the first of them still waiting (another claim may have taken some, which
-- then used room here too: never more starts than a rule allows, at worst
-- fewer until the next claim). Plain arrays, no query per candidate: this
-- runs under the lock.
CREATE FUNCTION redrive_limits_pick(ids uuid[], set_of integer[], sets integer[], keys text[],
                                    rooms integer[], seen bigint, most integer) RETURNS uuid[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    room integer[];
    width integer := coalesce(array_length(sets, 2), 0);
    chosen uuid[] := '{}';
    fits boolean;
    k integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('redrive:limits'));
    -- a statement of a volatile function reads with a snapshot of its own,
    -- taken now: it sees every claim that held the lock before this one
    SELECT array_agg(r.room - coalesce(s.n, 0) ORDER BY r.i) INTO room
    FROM unnest(keys, rooms) WITH ORDINALITY AS r(key, room, i)
    LEFT JOIN (SELECT p.key, count(*) AS n FROM redrive_permit AS p
               WHERE p.key = ANY(keys) AND p.seq > seen GROUP BY p.key) AS s ON s.key = r.key;
    FOR i IN 1..coalesce(cardinality(ids), 0) LOOP
        EXIT WHEN cardinality(chosen) >= most;
        fits := true;
        FOR w IN 1..width LOOP
            k := sets[set_of[i]][w];
            EXIT WHEN k = 0;
            IF room[k] <= 0 THEN
                fits := false;
                EXIT;
            END IF;
        END LOOP;
        CONTINUE WHEN NOT fits;
        FOR w IN 1..width LOOP
            k := sets[set_of[i]][w];
            EXIT WHEN k = 0;
            room[k] := room[k] - 1;
        END LOOP;
        chosen := chosen || ids[i];
    END LOOP;
    RETURN chosen;
END $$;
