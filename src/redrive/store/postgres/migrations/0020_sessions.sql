-- Dashboard sessions: the cookie holds a random id, the table a digest of it
-- and of the API token it was opened with, until it expires or is closed.
CREATE TABLE redrive_session (
    id         text PRIMARY KEY,
    principal  text NOT NULL,
    expires_at timestamptz NOT NULL
);
