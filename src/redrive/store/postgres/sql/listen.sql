-- LISTEN/NOTIFY: wake-ups for idle workers, and the waiters of a result.

-- name: wakeups_listen
LISTEN redrive_jobs;

-- name: finishes_listen
LISTEN redrive_done;

-- name: result_waiter_add
INSERT INTO redrive_result_waiter (job_id, waiter) VALUES (%(job_id)s, %(waiter)s);

-- name: result_waiter_remove
DELETE FROM redrive_result_waiter WHERE job_id = %(job_id)s AND waiter = %(waiter)s;
