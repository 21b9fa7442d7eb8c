"""Endings written in batches: whatever finished while the last write was in
flight goes out together, in one ``Store.jobs_finish``, and each run hears
what the store decided for it (a ``Finished``), or None when its lease was
gone."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from redrive.core.announcements import announcements
from redrive.core.job import Job, JobEvent, Lease
from redrive.core.states import Status
from redrive.core.transitions import Cancellation, Completion, FailNow, Finish, Finished, Requeue, RetryLater
from redrive.errors import StoreError
from redrive.runtime.offload import Offload
from redrive.store.port import Store
from redrive.stream import EventStream

log = logging.getLogger("redrive.worker")

STORE_RETRY_PAUSE_S = 1.0

Written = Callable[[Finished | None], None]


def announce(events: EventStream, done: Finished, *, duration_s: float | None = None,
             wait_s: float | None = None) -> None:
    """Emit what ``done`` announces (``core.announcements``), for whoever listens."""
    if events.active:
        for name, payload in announcements(done, duration_s=duration_s, wait_s=wait_s, wanted=events.wants):
            events.emit(name, **payload)


class Completer:
    def __init__(self, call: Offload, store: Callable[[], Store]) -> None:
        self._call = call
        self._store = store
        self._pending: list[tuple[Finish, int, Written]] = []
        self._ready = asyncio.Event()
        # Writes whose reply was lost: the commit may have happened all the same.
        self._uncertain: set[Lease] = set()
        self._confirming: set[asyncio.Future[None]] = set()

    def submit(self, item: Finish, attempt: int, written: Written) -> None:
        """Queue the ending of the run ``attempt`` of its job; ``written(finished)``
        follows once it is done, with None if the lease was gone. A callback,
        not a future per job: a batch of hundreds is answered without waking
        hundreds of tasks."""
        self._pending.append((item, attempt, written))
        self._ready.set()

    def drop(self, lease: Lease) -> None:
        """Write nothing more for ``lease`` (it was lost): a pending ending is
        answered None at once; one already being written lands or not."""
        kept = []
        for entry in self._pending:
            if entry[0].lease == lease:
                entry[2](None)
            else:
                kept.append(entry)
        self._pending = kept

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            batch, self._pending = self._pending, []
            try:
                finished = await self._call(self._store().jobs_finish, [item for item, _, _ in batch])
            except StoreError as exc:
                # The writes stay fenced: retrying after the lease expired
                # changes nothing, so retrying is always safe.
                log.warning("writing %d outcomes failed, retrying: %s", len(batch), exc)
                self._uncertain.update(item.lease for item, _, _ in batch)
                self._pending[:0] = batch
                await asyncio.sleep(STORE_RETRY_PAUSE_S)
                self._ready.set()
                continue
            by_lease = {f.lease: f for f in finished} if len(finished) != len(batch) else None
            for n, (item, attempt, written) in enumerate(batch):
                done = finished[n] if by_lease is None else by_lease.get(item.lease)
                if done is None and item.lease in self._uncertain:
                    # a lost reply, then a refused retry: read the job to tell which
                    confirming = asyncio.ensure_future(self._confirm(item, attempt, written))
                    self._confirming.add(confirming)
                    confirming.add_done_callback(self._confirming.discard)
                else:
                    written(done)
                if self._uncertain:  # (a lease hashes in Python: none is, most of the time)
                    self._uncertain.discard(item.lease)

    async def _confirm(self, item: Finish, attempt: int, written: Written) -> None:
        store = self._store()
        try:
            now = await self._call(store.job_get, job_id=item.lease.job_id)
            history = await self._call(store.job_events_list, job_id=item.lease.job_id) if now else []
        except StoreError:
            now, history = None, []
        done = _landed(item, attempt, now, history)
        if done is not None:
            log.info("job %s (%s): its ending was written before the connection was lost", done.lease.job_id,
                     done.task)
        written(done)


_ENDS_AS = {Completion: (Status.SUCCEEDED,), FailNow: (Status.FAILED,), Cancellation: (Status.CANCELLED,),
            RetryLater: (Status.QUEUED, Status.CANCELLED), Requeue: (Status.QUEUED,)}


def _landed(item: Finish, attempt: int, now: Job | None, history: list[JobEvent]) -> Finished | None:
    """What ``item``'s write did, if the job as read now shows it: run
    ``attempt`` ended at the status the item leads to, and nothing since."""
    if now is None or now.lease_token is not None or not history:
        return None
    refund = int(isinstance(item, Requeue) and item.refund)
    last = history[-1]
    if now.attempts != attempt - refund or now.status not in _ENDS_AS[type(item)] or \
            last.from_status is not Status.RUNNING or last.to_status is not now.status:
        return None
    if isinstance(item, (FailNow, RetryLater)) and now.last_error_code != item.error_code:
        return None
    meta = last.meta
    return Finished(item, now.task, now.queue, now.status, attempt, now.stage,
                    dead_letter_id=meta.get("dead_letter_id"), escalated=bool(meta.get("escalated")),
                    cancelled_by=meta.get("by") if now.status is Status.CANCELLED else None)
