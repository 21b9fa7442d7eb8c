"""After PostgreSQL restarts, a process whose pooled connections died with
the old server enqueues and reads at once, without one failed call first.
On a server of the test's own (tests/cluster.py)."""

from __future__ import annotations

from contextlib import closing

import pytest

from redrive import App
from redrive.store.postgres.store import PostgresStore

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_the_first_call_after_a_restart_succeeds(cluster, mode: str) -> None:
    with closing(PostgresStore(cluster.url, check_schema=False)) as migrating:
        migrating.migrate()
    app = App(cluster.url)

    @app.task
    def note(text: str) -> str:
        return text

    before = note.enqueue("before").job  # the pool holds a connection to this server
    cluster.stop(mode)
    cluster.start()
    after = note.enqueue("after").job  # not STORE_UNAVAILABLE
    assert {j.id for j in app.client.jobs().items} == {before.id, after.id}
    app.close()
