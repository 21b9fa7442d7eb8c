"""Enqueue: one job in one round trip; a batch in one statement, or in
chunks pipelined in one transaction (keyed jobs last, in key order, so
two batches cannot deadlock); inside the caller's own transaction too."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from itertools import chain, islice
from typing import Any
from uuid import UUID

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb

from redrive.core.job import EnqueueResult, NewJob, refuse_reuse
from redrive.core.states import Status
from redrive.core.workflow import NewWorkflow, WorkflowCreated
from redrive.errors import ConfigError
from redrive.store.postgres.codecs import _job, _new_job_json
from redrive.store.postgres.connection import _INSERT_CHUNK, _STATUS, Connected, Created, _savepoint


def _shared(job: NewJob) -> tuple[int, tuple[str, ...]]:
    """What ``jobs_insert_plain`` takes once for all its jobs: their trace
    context (one enqueue's jobs share one object, so its identity tells them
    apart) and their dependencies (one task's jobs share its tuple)."""
    return id(job.trace), job.dependencies


def _copied(job: NewJob) -> bool:
    """Whether ``jobs_copy`` can write the job: due now, without a key
    (nothing can leave it out) or trace context (its creation is implied)."""
    return job.key is None and job.run_at is None and not job.delay and not job.trace


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_value(value: str | None) -> str:
    """A value in COPY's text format (its NULL, its escapes)."""
    return "\\N" if value is None else value.translate(_COPY_ESCAPES)


def _copy_rows(jobs: list[NewJob], events: list[int]) -> Iterator[str]:
    """``jobs_copy``'s rows as COPY's text, a string for each chunk of jobs
    (sent while the next is built, so the server writes one as the client
    encodes the next), what a job shares with its task's other jobs written
    once (psycopg's binary COPY, a ``write_row`` a job, cost the client 60 %
    more CPU than this). Their creation and due times are left out: the
    columns' default, the transaction's clock (migration 0041), is what
    they would say, and the server parses no time from text."""
    shared: dict[tuple[Any, ...], str] = {}
    rows = []
    for n, (job, event) in enumerate(zip(jobs, events, strict=True), 1):
        name = (job.task, job.queue, job.priority, job.max_attempts, job.owner, job.stage, job.dependencies)
        if (middle := shared.get(name)) is None:
            dependencies = json.dumps(list(job.dependencies)) if job.dependencies else None
            middle = shared[name] = "\t".join((
                _copy_value(job.task), _copy_value(job.queue), "queued", str(job.priority), "0",
                str(job.max_attempts), _copy_value(job.owner), _copy_value(job.stage), _copy_value(dependencies)))
        args = _copy_value(json.dumps(job.args)) if job.args else "[]"
        kwargs = _copy_value(json.dumps(job.kwargs)) if job.kwargs else "\\N"
        rows.append(f"{job.id}\t{args}\t{kwargs}\t{event}\t{middle}\n")
        if n % _INSERT_CHUNK == 0 or n == len(jobs):
            yield "".join(rows)
            rows.clear()


def _one_statement(jobs: list[NewJob]) -> bool:
    lead = _shared(jobs[0])
    return all(_shared(job) == lead for job in jobs)


def _plain_params(docs: list[dict[str, Any]], lead: NewJob) -> dict[str, Any]:
    """``jobs_insert_plain``'s parameters: jobs that share ``lead``'s trace
    context and dependencies, which go once for all of them."""
    return {"jobs": Jsonb(docs), "meta": Jsonb(lead.created_meta),
            "dependencies": Jsonb(list(lead.dependencies)) if lead.dependencies else None}


def _created(rows: list[tuple]) -> tuple[dict[str, Created], datetime]:
    """One insert statement's answer (``jobs_insert``): the jobs it names, by
    the ids the client sent, and its clock (the row without an id)."""
    at = next(time for id, _, time in rows if id is None)
    return {id: (_STATUS[status], run_at or at, at) for id, status, run_at in rows if id is not None}, at


def _found(jobs: list[NewJob], docs: list[dict[str, Any]], created: dict[str, Created],
           at: datetime) -> list[Created | None]:
    """For each job, in order, how it was created, or None where its key was
    taken. A job without a key the answer leaves out was inserted due at the
    statement's clock, queued (``jobs_insert_plain``)."""
    due_now = (Status.QUEUED, at, at)  # one for all of them: a tuple holds no state
    return [created.get(doc["id"]) or (None if job.key else due_now) for job, doc in zip(jobs, docs, strict=True)]


def _taken_keys(jobs: list[NewJob], found: list[Created | None]) -> list[dict[str, str]]:
    """The keys already taken, to read the runs they point at."""
    return [{"task": j.task, "owner": j.owner or "", "key": j.key.key}
            for j, row in zip(jobs, found, strict=True) if row is None and j.key]


def _results(jobs: list[NewJob], found: list[Created | None], twins: list[dict[str, Any]]) -> list[EnqueueResult]:
    by_key = {(row["key_task"], row["key_owner"], row["key_name"]): row for row in twins}
    results = []
    for new, row in zip(jobs, found, strict=True):
        if row is not None:
            status, run_at, at = row
            results.append(EnqueueResult.created(new, status=status, run_at=run_at, at=at))
            continue
        assert new.key is not None, "only keyed jobs can be left out"
        twin = by_key[(new.task, new.owner or "", new.key.key)]
        refuse_reuse(new.key, twin["key_version"], twin["key_fingerprint"])
        results.append(EnqueueResult(_job(twin), duplicate=True))
    return results


class Enqueue(Connected):
    def now(self) -> datetime:
        return self._run("now")[0]["now"]

    def jobs_insert(self, *, jobs: Iterable[NewJob], conn: Any = None) -> list[EnqueueResult]:
        if conn is not None and not isinstance(conn, psycopg.Connection):
            raise ConfigError("PostgresStore joins only a psycopg (3) Connection's transaction")
        pending = iter(jobs)
        head = list(islice(pending, _INSERT_CHUNK + 1))
        if not head:
            return []
        if conn is not None:
            with self._errors(), _savepoint(conn):
                # text: the caller's connection may bind on the client (Django's
                # does), and such cursors cannot read binary
                return self._answer(*self._insert_pipelined(chain(head, pending), conn, binary=False), conn)
        if len(head) == 1 and not head[0].key:
            return [self._insert_one(head[0])]
        if len(head) <= _INSERT_CHUNK and not any(j.key for j in head) and _one_statement(head):
            # one statement in autocommit: already atomic, one round trip
            docs = [_new_job_json(j) for j in head]
            return self._answer(head, docs, *_created(self._run(
                "jobs_insert_plain", _plain_params(docs, head[0]), rows=tuple_row, binary=True)))
        if len(head) > _INSERT_CHUNK:
            head += pending
            # COPY's rows take their times from the database's clock (migration
            # 0041): a test's clock goes by the statements, which read it
            if self._clock is None and all(_copied(job) for job in head):
                return self._insert_copied(head)
        with self._errors(), self._connection() as pooled, pooled.transaction():
            # a refusal found after the insert statements must undo them
            return self._answer(*self._insert_pipelined(chain(head, pending), pooled, binary=True), pooled)

    def _insert_copied(self, jobs: list[NewJob]) -> list[EnqueueResult]:
        """A big batch of jobs due now without keys or trace context (what
        most batches are) by COPY, which PostgreSQL writes a page of rows at a
        time: one WAL record a page, not one a row (40 bytes less a job,
        docs/storage.md). Their clock, their creation events' ids (implied,
        migration 0032) and the queues' wake-ups come first, in the same transaction."""
        queues = sorted({job.queue for job in jobs})
        with self._errors(), self._connection() as pooled, pooled.transaction():
            cur = pooled.cursor(row_factory=tuple_row, binary=True)
            [(at, events, _)] = cur.execute(self._queries["jobs_copy_start"],
                                            self._with_clock({"jobs": len(jobs), "queues": queues})).fetchall()
            with cur.copy(self._queries["jobs_copy"]) as copy:
                for rows in _copy_rows(jobs, events):
                    copy.write(rows)
        return [EnqueueResult.created(job, status=Status.QUEUED, run_at=at, at=at) for job in jobs]

    def _insert_one(self, job: NewJob) -> EnqueueResult:
        """One job without a key, in autocommit: one round trip, typed
        parameters, the answer in binary (times eight bytes each, not text)."""
        [(status, run_at, at, _)] = self._run("job_insert", {
            "id": job.id, "task": job.task, "queue": job.queue, "args": Jsonb(job.args) if job.args else None,
            "kwargs": Jsonb(job.kwargs) if job.kwargs else None, "priority": job.priority,
            "max_attempts": job.max_attempts, "owner": job.owner, "run_at": job.run_at, "stage": job.stage,
            "delay_s": job.delay.total_seconds() if job.delay else 0.0,
            "dependencies": Jsonb(list(job.dependencies)) if job.dependencies else None,
            "meta": Jsonb(job.created_meta) if job.trace else None,
        }, rows=tuple_row, binary=True)
        return EnqueueResult.created(job, status=Status(status), run_at=run_at, at=at)

    def _answer(
        self, jobs: list[NewJob], docs: list[dict[str, Any]], created: dict[str, Created], at: datetime,
        conn: psycopg.Connection | None = None,
    ) -> list[EnqueueResult]:
        """Each job as created, or the run its taken key points at."""
        found = _found(jobs, docs, created, at)
        names = _taken_keys(jobs, found)
        twins = self._run("job_keys_get", {"keys": Jsonb(names)}, conn=conn) if names else []
        return _results(jobs, found, twins)

    def _insert_parts(
        self, pending: Iterator[NewJob], jobs: list[NewJob], docs: list[dict[str, Any]],
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Each insert statement and its parameters, built as they are asked
        for (adding to ``jobs`` and ``docs``): plain jobs in chunks, a
        statement for each trace context and set of dependencies in the chunk
        (a batch of one task has one; tasks taking turns do not make a
        statement a job), then the keyed ones in one statement that takes
        their keys in sorted order, so two batches cannot deadlock."""
        keyed: list[dict[str, Any]] = []
        while chunk := list(islice(pending, _INSERT_CHUNK)):
            jobs += chunk
            # the first job of each group (which the statement's shared values
            # come from), and the group's jobs
            groups: dict[tuple[int, tuple[str, ...]], tuple[NewJob, list[dict[str, Any]]]] = {}
            for job in chunk:
                doc = _new_job_json(job)
                docs.append(doc)
                if job.key:
                    if job.trace:
                        doc["trace"] = dict(job.trace)
                    if job.dependencies:
                        doc["dependencies"] = job.dependencies  # a tuple: json writes it as an array
                    keyed.append(doc)
                    continue
                group = groups.get(name := _shared(job))
                if group is None:
                    group = groups[name] = (job, [])
                group[1].append(doc)
            for lead, plain in groups.values():
                yield "jobs_insert_plain", self._plain(plain, lead)
        if keyed:
            yield "jobs_insert", self._with_clock({"jobs": Jsonb(keyed)}) or {}

    def _plain(self, docs: list[dict[str, Any]], lead: NewJob) -> dict[str, Any]:
        return self._with_clock(_plain_params(docs, lead)) or {}

    def _insert_pipelined(
        self, pending: Iterator[NewJob], conn: psycopg.Connection, *, binary: bool,
    ) -> tuple[list[NewJob], list[dict[str, Any]], dict[str, Created], datetime]:
        """Sends each chunk as soon as it is built, so the server inserts one
        while the caller checks and encodes the next (about a third faster for
        1,000 jobs than one statement). ``binary``: the answer's times as
        eight bytes each, not text to parse (a quarter faster for 1,000 jobs)."""
        jobs: list[NewJob] = []
        docs: list[dict[str, Any]] = []
        with conn.pipeline():
            sent = [conn.cursor(row_factory=tuple_row, binary=binary).execute(self._queries[name], params)
                    for name, params in self._insert_parts(pending, jobs, docs)]
        created: dict[str, Created] = {}
        for cur in sent:
            answered, at = _created(cur.fetchall())  # one transaction: one clock for all
            created.update(answered)
        return jobs, docs, created, at

    async def jobs_insert_async(self, *, jobs: Iterable[NewJob], conn: Any) -> list[EnqueueResult]:
        """``jobs_insert`` in the transaction of the caller's psycopg
        ``AsyncConnection`` (a SQLAlchemy ``AsyncSession``'s), without blocking
        its event loop: the job exists if and only if that transaction commits."""
        if not isinstance(conn, psycopg.AsyncConnection):
            raise ConfigError("PostgresStore joins only a psycopg (3) AsyncConnection's transaction asynchronously")
        created: list[NewJob] = []
        docs: list[dict[str, Any]] = []
        with self._errors():
            if not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
                await conn.execute("SELECT 1")  # begins the caller's transaction, as in _savepoint
            async with conn.transaction():
                made: dict[str, Created] = {}
                for name, params in self._insert_parts(iter(jobs), created, docs):
                    cur = await conn.cursor(row_factory=tuple_row).execute(self._queries[name], params)
                    answered, at = _created(await cur.fetchall())
                    made.update(answered)
                found = _found(created, docs, made, at)
                names = _taken_keys(created, found)
                twins: list[dict[str, Any]] = []
                if names:
                    read = await conn.cursor(row_factory=dict_row).execute(
                        self._queries["job_keys_get"], self._with_clock({"keys": Jsonb(names)}))
                    twins = await read.fetchall()
        return _results(created, found, twins)

    def _workflow_create(self, workflow: NewWorkflow, conn: psycopg.Connection) -> WorkflowCreated:
        """The workflow written (``_workflow_write``) and answered: its steps'
        job ids, or the workflow that holds its key."""
        if not self._workflow_write(workflow, conn):
            held = self._run("workflow_by_key", {"owner": workflow.owner, "key": workflow.key}, conn=conn)[0]["id"]
            return WorkflowCreated(held, duplicate=True, steps=self._steps_of(held, conn))
        return WorkflowCreated(workflow.id, duplicate=False, steps=self._steps_of(workflow.id, conn))

    def _workflow_write(self, workflow: NewWorkflow, conn: psycopg.Connection) -> bool:
        """A workflow, its steps (jobs: a step with parents pending) and its
        edges, in one statement in ``conn``'s transaction (``workflow_insert``'s,
        or the ending of the job that spawned it). False when its key is taken:
        nothing was written."""
        parents = workflow.parents()
        steps = [{**_new_job_json(step.job), "dependencies": list(step.job.dependencies), "name": step.name,
                  "position": step.position, "waiting": parents.get(step.job.id, 0)} for step in workflow.steps]
        edges = [{"parent_id": e.parent.hex, "child_id": e.child.hex, "policy": e.policy.value}
                 for e in workflow.edges]
        lead = workflow.steps[0].job.created_meta if workflow.steps else {}
        (made,) = self._run("workflow_create", {
            "id": workflow.id, "name": workflow.name, "owner": workflow.owner, "key": workflow.key,
            "graph": Jsonb(list(workflow.graph.items())), "spawned_by": workflow.spawned_by,
            "steps": Jsonb(steps), "edges": Jsonb(edges), "meta": Jsonb(lead), "open": len(steps)}, conn=conn)
        return bool(made["made"])

    def _steps_of(self, workflow_id: UUID, conn: Any = None) -> dict[str, tuple[UUID, ...]]:
        named: dict[str, list[UUID]] = {}
        for row in self._run("workflow_steps", {"id": workflow_id, "statuses": None}, conn=conn):
            named.setdefault(row["name"], []).append(row["job_id"])
        return {name: tuple(ids) for name, ids in named.items()}
