"""LISTEN/NOTIFY: wake-ups for idle workers, and the endings a result's
waiters hear of, each on a connection of its own (direct, or
``REDRIVE_LISTEN_URL`` through a transaction pooler)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from uuid import UUID, uuid4

import psycopg

from redrive.errors import StoreError
from redrive.store.postgres.connection import _CONNECT_TIMEOUT_S, _reason, log
from redrive.store.postgres.reads import Reading


class Listening(Reading):
    def wakeups_subscribe(self, on_wake: Callable[[str], None]) -> Callable[[], None]:
        if not self._listen_url:
            log.info("PostgreSQL at %s is behind a transaction-mode pooler and no REDRIVE_LISTEN_URL is set: "
                     "workers find new jobs by polling", self._where)
            return lambda: None
        stop = threading.Event()

        def listen() -> None:
            lost = False
            while not stop.is_set():
                try:
                    with self._connect(listening=True) as conn:
                        conn.execute(self._queries["wakeups_listen"])
                        if lost:
                            log.info("LISTEN connection back (%s:%s)", conn.info.host, conn.info.port)
                        lost = False
                        while not stop.is_set():
                            for note in conn.notifies(timeout=0.5):
                                on_wake(note.payload)
                except (StoreError, psycopg.Error) as exc:
                    # Polling still finds the jobs; try to listen again shortly (said once per outage).
                    if not lost:
                        log.warning("LISTEN connection lost (%s); workers poll meanwhile", _reason(exc))
                    lost = True
                    stop.wait(1.0)

        thread = threading.Thread(target=listen, name="redrive-listen", daemon=True)
        thread.start()

        def unsubscribe() -> None:
            stop.set()
            thread.join(timeout=2)

        return unsubscribe

    def finishes_subscribe(self, *, job_id: UUID, on_finish: Callable[[], None]) -> Callable[[], None]:
        # One listening connection per store serves every waiter; a waiter's
        # row makes the job's ending send a NOTIFY (migration 0014).
        if not self._listen_url:
            return lambda: None  # nowhere to LISTEN: the waiter's re-reads find the ending
        with self._finish_lock:
            self._finish_listeners.setdefault(str(job_id), []).append(on_finish)
            if self._finish_thread is None:
                self._finish_thread = threading.Thread(target=self._listen_finishes, name="redrive-listen-done",
                                                       daemon=True)
                self._finish_thread.start()
        self._finish_ready.wait(_CONNECT_TIMEOUT_S)  # listening before the caller reads the job
        waiter = uuid4()
        self._run("result_waiter_add", {"job_id": job_id, "waiter": waiter})

        def stop() -> None:
            with self._finish_lock:
                self._finish_listeners[str(job_id)].remove(on_finish)
            try:
                self._run("result_waiter_remove", {"job_id": job_id, "waiter": waiter})
            except StoreError as exc:  # a stale row only costs a NOTIFY nobody hears
                log.warning("could not remove a result waiter: %s", exc)

        return stop

    def _listen_finishes(self) -> None:
        lost = False
        while not self._closing.is_set():
            try:
                with self._connect(listening=True) as conn:
                    conn.execute(self._queries["finishes_listen"])
                    lost = False
                    self._finish_ready.set()
                    while not self._closing.is_set():
                        for note in conn.notifies(timeout=0.5):
                            with self._finish_lock:
                                told = list(self._finish_listeners.get(note.payload, ()))
                            for on_finish in told:
                                on_finish()
            except (StoreError, psycopg.Error) as exc:
                if not lost:
                    log.warning("LISTEN for results lost (%s); waiters re-read their jobs meanwhile", _reason(exc))
                lost = True
                self._closing.wait(1.0)

    def close(self) -> None:
        self._closing.set()
        # Its threads may be connecting into a partition: do not wait them out.
        self._pool.close(timeout=0)
