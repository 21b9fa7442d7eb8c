-- A breaker's change is read, decided in the worker (core/breaker.py) and
-- written only if the row is still the version read: no row lock is held
-- across the round trip in between, so workers on many hosts never queue on
-- the one row of a dependency (a write that lost the race reads again).
ALTER TABLE redrive_breaker ADD COLUMN version bigint NOT NULL DEFAULT 0;
