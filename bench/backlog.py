"""``python -m bench.backlog``: the dashboard and the API over a big backlog
on PostgreSQL (docs/performance.md). A scratch database gets ``--queued``
waiting jobs, 10,000 running and ``--finished`` finished ones (copied from real rows of each
kind with ``generate_series``: fast, and every column as redrive writes it),
and some dead letters; a real server on 127.0.0.1 then answers each page
and route in turn, ``--repeats`` times. Each figure is the median, against
the login page (which reads no job) in the same run, and held to the issue's
bounds: under 100 ms and under 10 times the login page. ``--index-cost
JOBS`` measures instead what the indexes these reads need cost the hot path:
enqueue and two processes claiming, against a database without them.
``--sqlite`` measures the same pages on a SQLite file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import closing
from datetime import timedelta
from urllib.parse import urlsplit

import httpx
import psycopg

from redrive import App, JobRequest, Status
from redrive.core.transitions import Completion, FailNow
from redrive.http import TokenAuth, create_api
from redrive.http.auth import parse_tokens
from redrive.store.reads import JobFilter

OPERATOR = "bench-operator-0123456789abcdef"
TASKS, QUEUES, OWNERS = 20, 5, 100
BOUND_MS, BOUND_RATIO = 100.0, 10.0
# Running jobs, as many as a fleet of workers holds at once: the job list
# reads them apart from the waiting ones on PostgreSQL (migration 0035)
RUNNING = 10_000


def _noop(*args: object) -> None:
    """The tasks the rows name: the bench reads jobs, it runs none."""


def _scratch(server: str) -> str:
    name = f"redrive_backlog_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return name


def _drop(server: str, name: str) -> None:
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_LETTER = {"job_id": "d.id", "task": "d.task", "queue": "d.queue", "owner": "d.owner"}


def _fill(app: App, url: str, queued: int, finished: int, letters: int) -> None:
    """One real job of each kind, then copies of it: ids, times, task, queue and owner varied."""
    app.enqueue_many([JobRequest("t0", args=[n], queue="q0", owner="o0") for n in range(4)])
    store = app.store
    done, broken = store.jobs_claim(queues=["q0"], limit=2, worker_id="bench", lease_ttl=timedelta(hours=1))
    store.jobs_finish([Completion(done.lease, {"ok": True}), FailNow(broken.lease, "BAD_INPUT", "no")])
    (running,) = store.jobs_claim(queues=["q0"], limit=1, worker_id="bench", lease_ttl=timedelta(hours=1))
    with psycopg.connect(url, autocommit=True) as conn:
        columns = [name for (name,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'redrive_job' "
            "ORDER BY ordinal_position")]
        varied = {
            "id": "gen_random_uuid()",
            "task": f"'t' || (g %% {TASKS})", "queue": f"'q' || (g %% {QUEUES})", "owner": f"'o' || (g %% {OWNERS})",
            "created_at": "now() - make_interval(secs => g * 0.01)", "run_at": "now() - make_interval(secs => g * 0.01)",
        }
        names = ", ".join(columns)
        # Finished ones ended spread out too (the overview's hour reads them by finished_at)
        ended = {**varied, "finished_at": "now() - make_interval(secs => g * 0.01)",
                 "updated_at": "now() - make_interval(secs => g * 0.01)"}
        # The waiting jobs: copies of the fourth, still queued; the running ones, of the third
        template = store.jobs_page(where=JobFilter(statuses=(Status.QUEUED,)), limit=1).items[0].id
        held = {**varied, "lease_token": "gen_random_uuid()"}
        for table, source, count in (("redrive_job", template, queued), ("redrive_job", running.id, RUNNING),
                                     ("redrive_job_done", done.id, finished // 2),
                                     ("redrive_job_done", broken.id, finished - finished // 2)):
            started = time.perf_counter()
            kind = ended if table == "redrive_job_done" else held if source == running.id else varied
            chosen = ", ".join(kind.get(c, f"t.{c}") for c in columns)
            if table == "redrive_job_done" and source == broken.id:
                chosen = chosen.replace("t.failed_at", "now() - make_interval(secs => g * 0.01)")
            conn.execute(f"INSERT INTO {table} ({names}) SELECT {chosen} FROM generate_series(1, %s) AS g, "
                         f"(SELECT * FROM {'redrive_job' if table == 'redrive_job' else 'redrive_job_done'} "
                         f"WHERE id = %s) AS t", (count, source))
            print(f"  {count:>10,} rows into {table} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        letter_columns = [name for (name,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'redrive_dead_letter' "
            "AND column_name <> 'id' ORDER BY ordinal_position")]
        # each letter for a job of its own, as failures write them (the planner's statistics see that)
        conn.execute(f"INSERT INTO redrive_dead_letter ({', '.join(letter_columns)}) "
                     f"SELECT {', '.join(_LETTER.get(c, 'l.' + c) for c in letter_columns)} "
                     "FROM (SELECT id, task, queue, owner FROM redrive_job_done WHERE status = 'failed' LIMIT %s) AS d, "
                     "(SELECT * FROM redrive_dead_letter LIMIT 1) AS l", (letters,))
        # A week of rollups as a busy system keeps them: per task (in its queue) and minute for
        # the last two hours, per hour before that (as the compaction leaves them); successes in
        # three duration buckets, failures, retries and waits in two
        started = time.perf_counter()
        conn.execute(
            "INSERT INTO redrive_rollup (at, queue, task, shard, kind, bucket, n) "
            "SELECT at, 'q' || (t %% %s), 't' || t, 0, k.kind, k.bucket, 1 + (at / 60 + t) %% 50 "
            "FROM generate_series(0, %s - 1) AS t, "
            "LATERAL (SELECT m * 60 AS at FROM generate_series((extract(epoch FROM now())::bigint - 2 * 3600) / 60, "
            "                                                  extract(epoch FROM now())::bigint / 60) AS m "
            "         UNION ALL SELECT h * 3600 FROM generate_series((extract(epoch FROM now())::bigint - 7 * 86400) / 3600, "
            "                                                        (extract(epoch FROM now())::bigint - 2 * 3600) / 3600 - 1) AS h) AS a, "
            "(VALUES ('succeeded', 3), ('succeeded', 4), ('succeeded', 5), ('failed', 4), ('retried', 6), "
            "        ('wait', 1), ('wait', 2)) AS k(kind, bucket)", (QUEUES, TASKS))
        print(f"  {conn.execute('SELECT count(*) FROM redrive_rollup').fetchone()[0]:>10,} rollup rows in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
        conn.execute("ANALYZE")


def _serve(app: App) -> tuple[str, Callable[[], None]]:
    import threading

    import uvicorn

    server = uvicorn.Server(uvicorn.Config(create_api(app, auth=TokenAuth(parse_tokens([f"{OPERATOR}=operator:bench"]))),
                                           host="127.0.0.1", port=0, log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]

    def stop() -> None:
        server.should_exit = True
        thread.join(10)

    return f"http://127.0.0.1:{port}", stop


def _fifth(browser: httpx.Client, query: str) -> str:
    """The fifth page's address, by following the list's own next-page links."""
    import html
    import re

    path = f"/jobs?{query}"
    for _ in range(4):
        found = re.search(r'href="(\?[^"]*cursor=[^"]+)"', browser.get(path).text)
        assert found, f"no next page after {path}"
        path = "/jobs" + html.unescape(found.group(1))
    return path


def _pages(browser: httpx.Client) -> dict[str, tuple[str, str]]:
    """What is measured: (who asks, the address)."""
    return {
        "login page (the floor)": ("browser", "/login"),
        "overview": ("browser", "/"),
        "jobs, first page": ("browser", "/jobs"),
        "jobs, fifth page": ("browser", _fifth(browser, "limit=50")),
        "jobs by task, first page": ("browser", "/jobs?task=t7"),
        "jobs by status, first page": ("browser", "/jobs?status=failed"),
        "jobs by owner, first page": ("browser", "/jobs?owner=o42"),
        "jobs by owner, fifth page": ("browser", _fifth(browser, "owner=o42")),
        "dead letters": ("browser", "/dead-letters"),
        "charts, 24 hours per task": ("browser", "/charts?window=24h&by=task"),
        "GET /api/v1/queues": ("api", "/api/v1/queues"),
        "GET /api/v1/jobs": ("api", "/api/v1/jobs"),
        "GET /metrics": ("api", "/metrics"),
    }


def measure(server: str, queued: int, finished: int, letters: int, repeats: int) -> list[tuple[str, float, float]]:
    name = _scratch(server)
    url = f"{server}/{name}"
    try:
        from redrive.store.postgres.store import PostgresStore

        with closing(PostgresStore(url, check_schema=False)) as migrating:
            migrating.migrate()
        app = _app(url)
        print(f"filling {queued:,} queued and {finished:,} finished jobs...", file=sys.stderr)
        _fill(app, url, queued, finished, letters)
        return _timed(app, repeats)
    finally:
        _drop(server, name)


def measure_sqlite(queued: int, finished: int, letters: int, repeats: int) -> list[tuple[str, float, float]]:
    """The same pages on SQLite: a file in a temporary directory, filled the same way."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/backlog.db"
        app = _app(f"sqlite:///{path}")
        print(f"filling {queued:,} queued and {finished:,} finished jobs (SQLite)...", file=sys.stderr)
        _fill_sqlite(app, path, queued, finished, letters)
        return _timed(app, repeats)


def _app(url: str) -> App:
    app = App(url)
    for n in range(TASKS):
        app.task(name=f"t{n}")(_noop)
    return app


def _fill_sqlite(app: App, path: str, queued: int, finished: int, letters: int) -> None:
    """As ``_fill``: one real job of each kind, then copies, with SQLite's own ids and times."""
    import sqlite3

    app.enqueue_many([JobRequest("t0", args=[n], queue="q0", owner="o0") for n in range(3)])
    store = app.store
    done, broken = store.jobs_claim(queues=["q0"], limit=2, worker_id="bench", lease_ttl=timedelta(hours=1))
    store.jobs_finish([Completion(done.lease, {"ok": True}), FailNow(broken.lease, "BAD_INPUT", "no")])
    waiting = store.jobs_page(where=JobFilter(statuses=(Status.QUEUED,)), limit=1).items[0].id
    conn = sqlite3.connect(path, isolation_level=None)
    uuid_text = ("lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-' || hex(randomblob(2)) || '-' || "
                 "hex(randomblob(2)) || '-' || hex(randomblob(6)))")  # a fresh one per row
    for table, source, count in (("redrive_job", waiting, queued), ("redrive_job_done", done.id, finished // 2),
                                 ("redrive_job_done", broken.id, finished - finished // 2)):
        started = time.perf_counter()
        columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        varied = {"id": uuid_text, "task": f"'t' || (g % {TASKS})", "queue": f"'q' || (g % {QUEUES})",
                  "owner": f"'o' || (g % {OWNERS})", "created_at": "t.created_at - g * 0.01",
                  "run_at": "t.run_at - g * 0.01", "finished_at": "t.finished_at - g * 0.01",
                  "updated_at": "t.updated_at - g * 0.01"}
        conn.execute(f"WITH RECURSIVE n(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM n WHERE g < ?) "
                     f"INSERT INTO {table} ({', '.join(columns)}) "
                     f"SELECT {', '.join(varied.get(c, f't.{c}') for c in columns)} "
                     f"FROM n, (SELECT * FROM {table} WHERE id = ?) AS t", (count, str(source)))
        print(f"  {count:>10,} rows into {table} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(redrive_dead_letter)") if row[1] != "id"]
    conn.execute(f"INSERT INTO redrive_dead_letter ({', '.join(columns)}) "
                 f"SELECT {', '.join(_LETTER.get(c, 'l.' + c) for c in columns)} "
                 "FROM (SELECT id, task, queue, owner FROM redrive_job_done WHERE status = 'failed' LIMIT ?) AS d, "
                 "(SELECT * FROM redrive_dead_letter LIMIT 1) AS l", (letters,))
    now = int(time.time())
    conn.execute(
        "WITH RECURSIVE m(at) AS (SELECT ?1 / 60 * 60 - 7200 UNION ALL SELECT at + 60 FROM m WHERE at < ?1 - 60), "
        "h(at) AS (SELECT ?1 / 3600 * 3600 - 7 * 86400 UNION ALL SELECT at + 3600 FROM h WHERE at < ?1 - 3 * 3600), "
        "t(t) AS (SELECT 0 UNION ALL SELECT t + 1 FROM t WHERE t < ?2 - 1) "
        "INSERT INTO redrive_rollup (at, queue, task, shard, kind, bucket, n) "
        "SELECT a.at, 'q' || (t.t % ?3), 't' || t.t, 0, k.kind, k.bucket, 1 + (a.at / 60 + t.t) % 50 "
        "FROM t, (SELECT at FROM m UNION ALL SELECT at FROM h) AS a, "
        "(SELECT 'succeeded' AS kind, 3 AS bucket UNION ALL SELECT 'succeeded', 4 UNION ALL SELECT 'succeeded', 5 "
        " UNION ALL SELECT 'failed', 4 UNION ALL SELECT 'retried', 6 UNION ALL SELECT 'wait', 1 "
        " UNION ALL SELECT 'wait', 2) AS k", (now, TASKS, QUEUES))
    conn.execute("ANALYZE")
    conn.close()


def _timed(app: App, repeats: int) -> list[tuple[str, float, float]]:
    """Each page and route in turn, ``repeats`` times, from a real server; then a prune batch."""
    base, stop = _serve(app)
    try:
        with httpx.Client(base_url=base, timeout=120, headers={"Origin": base}) as browser, \
                httpx.Client(base_url=base, timeout=120, headers={"Authorization": f"Bearer {OPERATOR}"}) as api:
            assert browser.post("/login", data={"token": OPERATOR}).status_code == 303
            pages = _pages(browser)
            clients = {"browser": browser, "api": api}
            times: dict[str, list[float]] = {label: [] for label in pages}
            for _ in range(repeats):
                for label, (who, path) in pages.items():  # in turn: the machine's drift hits them alike
                    started = time.perf_counter()
                    answer = clients[who].get(path)
                    times[label].append((time.perf_counter() - started) * 1000)
                    assert answer.status_code == 200, (label, answer.status_code, answer.text[:200])
        # Retention at this size: one batch of the pruner (1,000 of the finished jobs older than an hour)
        label = "prune, one batch of 1,000"
        times[label] = []
        for _ in range(repeats):
            started = time.perf_counter()
            assert app.store.jobs_prune(older_than=timedelta(hours=1), limit=1000) == 1000
            times[label].append((time.perf_counter() - started) * 1000)
    finally:
        stop()
        app.close()
    floor = statistics.median(times["login page (the floor)"])
    return [(label, statistics.median(ms), statistics.median(ms) / floor) for label, ms in times.items()]


# The indexes the big backlog's reads added (migrations 0019, 0023, 0024): what they cost the hot path
NEW_INDEXES = ("redrive_job_created", "redrive_job_waiting", "redrive_job_done_unsucceeded")


def _drain(url: str, seconds: list[float]) -> None:
    """One worker process's loop without a worker: claim 100, end them, until none is left."""
    from redrive.store.postgres.store import PostgresStore

    store = PostgresStore(url)
    started = time.perf_counter()
    while jobs := store.jobs_claim(queues=["default"], limit=100, worker_id="bench", lease_ttl=timedelta(minutes=5)):
        store.jobs_finish([Completion(job.lease, None, {"duration_ms": 1, "wait_ms": 1}) for job in jobs])
    seconds.append(time.perf_counter() - started)
    store.close()


def _hot_path(url: str, jobs: int) -> dict[str, float]:
    """Jobs per second: single enqueues, enqueues of 1,000, and two processes claiming and ending them."""
    import multiprocessing

    app = App(url)
    app.task(name="t0")(_noop)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("TRUNCATE redrive_job, redrive_job_done, redrive_job_event, redrive_rollup, redrive_job_key")
        started = time.perf_counter()
        for _ in range(jobs // 10):
            app.enqueue("t0")
        single = jobs // 10 / (time.perf_counter() - started)
        started = time.perf_counter()
        for _ in range(jobs // 1000):
            app.enqueue_many([JobRequest("t0")] * 1000)
        batch = jobs // 1000 * 1000 / (time.perf_counter() - started)
        with multiprocessing.Manager() as manager:
            seconds = manager.list()
            started = time.perf_counter()
            workers = [multiprocessing.Process(target=_drain, args=(url, seconds)) for _ in range(2)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            drained = (jobs + jobs // 10) / (time.perf_counter() - started)
        return {"enqueue, 1 a call": single, "enqueue, 1,000 a call": batch, "claim and end, 2 processes": drained}
    finally:
        app.close()


def index_cost(server: str, jobs: int, repeats: int) -> list[tuple[str, float, float]]:
    """The hot path with the new indexes against the same without them, taking turns, medians."""
    from redrive.store.postgres.store import PostgresStore

    names = [_scratch(server), _scratch(server)]
    try:
        for name in names:
            PostgresStore(f"{server}/{name}", check_schema=False).migrate()
        with psycopg.connect(f"{server}/{names[1]}", autocommit=True) as conn:
            for index in NEW_INDEXES:
                conn.execute(f"DROP INDEX {index}")
        runs: dict[str, list[dict[str, float]]] = {"with": [], "without": []}
        for _ in range(repeats):
            for label, name in zip(("with", "without"), names, strict=True):
                runs[label].append(_hot_path(f"{server}/{name}", jobs))
        return [(figure, statistics.median(r[figure] for r in runs["with"]),
                 statistics.median(r[figure] for r in runs["without"])) for figure in runs["with"][0]]
    finally:
        for name in names:
            _drop(server, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backlog", description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--queued", type=int, default=1_000_000)
    parser.add_argument("--finished", type=int, default=10_000_000)
    parser.add_argument("--letters", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sqlite", action="store_true", help="the same pages on a SQLite file instead")
    parser.add_argument("--index-cost", type=int, metavar="JOBS", default=0,
                        help="instead: the enqueue and claim cost of the backlog's indexes, over JOBS jobs a repeat")
    args = parser.parse_args(argv)
    if urlsplit(args.server).hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("the bench runs against a local server only")
    if args.index_cost:
        print(f"| figure (jobs/s), medians of {args.repeats} | with the indexes | without | ratio |\n|---|---:|---:|---:|")
        for figure, with_, without in index_cost(args.server, args.index_cost, args.repeats):
            print(f"| {figure} | {with_:,.0f} | {without:,.0f} | {with_ / without:.2f} |")
        return 0
    rows = (measure_sqlite(args.queued, args.finished, args.letters, args.repeats) if args.sqlite
            else measure(args.server, args.queued, args.finished, args.letters, args.repeats))
    print(f"\n{'SQLite' if args.sqlite else 'PostgreSQL'}: {args.queued:,} queued, {args.finished:,} finished, "
          f"{args.letters:,} dead letters; medians of {args.repeats}")
    print(f"| page | ms | × login | under {BOUND_MS:g} ms and {BOUND_RATIO:g}× |\n|---|---:|---:|---|")
    failed = 0
    for label, ms, ratio in rows:
        if label.startswith("prune"):  # not a page: bounded by its batch, shown for the record
            print(f"| {label} | {ms:.1f} | {ratio:.1f} | (not a page) |")
            continue
        held = ms < BOUND_MS and ratio < BOUND_RATIO
        failed += not held
        print(f"| {label} | {ms:.1f} | {ratio:.1f} | {'yes' if held else 'NO'} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
