"""The redrive command as a user runs it: clear one-line errors, never a
traceback. Run in this process through its entry function (tests/e2e/cli.py),
but where the process itself is the point: a worker's environment, a .env
file found in the working directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from redrive import App, ArgumentsNotSerializable, UnknownTask
from redrive.store.sql import load_migrations
from tests.e2e.cli import REPO, Ran, redrive, redrive_process

APP = "tests.apps.drain:app"


def assert_clean_error(result: Ran | subprocess.CompletedProcess, code: str, *phrases: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"redrive: error [{code}]: ")
    for phrase in phrases:
        assert phrase in lines[0]


def test_enqueue_list_and_show(sqlite_url: str) -> None:
    made = redrive("enqueue", APP, "record", "--args", '["k1"]', "--priority", "3", url=sqlite_url)
    assert made.returncode == 0, made.stderr
    job_id = made.stdout.strip()
    listed = redrive("jobs", "list", "--json", url=sqlite_url)
    (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["id"] == job_id and row["args"] == ["k1"] and row["priority"] == 3
    shown = redrive("jobs", "show", job_id, url=sqlite_url)
    assert "status             queued" in shown.stdout
    assert "-         -> queued" in shown.stdout


def test_enqueue_with_an_idempotency_key_is_safe_to_repeat(sqlite_url: str) -> None:
    first = redrive("enqueue", APP, "record", "--args", '["k1"]', "--idempotency-key", "run-1", url=sqlite_url)
    again = redrive("enqueue", APP, "record", "--args", '["k1"]', "--idempotency-key", "run-1", url=sqlite_url)
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    assert again.stdout.strip() == f"{first.stdout.strip()} (already enqueued: queued)"
    assert_clean_error(redrive("enqueue", APP, "record", "--args", '["k2"]', "--idempotency-key", "run-1",
                               url=sqlite_url), "IDEMPOTENCY_KEY_REUSED", "'run-1'", "other arguments")
    assert_clean_error(redrive("enqueue", APP, "record", "--idempotency-key", "x" * 256, url=sqlite_url),
                       "CONFIG_INVALID", "at most 255 characters")
    assert_clean_error(redrive("enqueue", APP, "record", "--idempotency-key", "k", "--version", "0",
                               url=sqlite_url), "CONFIG_INVALID", "positive integer")
    rerun = redrive("enqueue", APP, "record", "--args", '["k2"]', "--idempotency-key", "run-1",
                    "--version", "2", url=sqlite_url)
    assert rerun.returncode == 0 and "already" not in rerun.stdout


def test_an_app_a_function_builds_is_named_by_its_call(sqlite_url: str) -> None:
    made = redrive("enqueue", "tests.apps.factory:make_app()", "built", "--args", '["x"]', url=sqlite_url)
    assert made.returncode == 0, made.stderr
    listed = redrive("jobs", "list", "--json", "--app", "tests.apps.factory:make_app()", url=sqlite_url)
    assert [json.loads(line)["task"] for line in listed.stdout.splitlines()] == ["built"]
    assert_clean_error(redrive("enqueue", "tests.apps.factory:make_app", "built", url=sqlite_url),
                       "CONFIG_INVALID", "is a function", "tests.apps.factory:make_app()")
    assert_clean_error(redrive("enqueue", "tests.apps.factory:needs_settings()", "built", url=sqlite_url),
                       "CONFIG_INVALID", "with no arguments")
    assert_clean_error(redrive("enqueue", "tests.apps.factory:make_app(1)", "built", url=sqlite_url),
                       "CONFIG_INVALID", "must look like")


def test_a_scheduler_without_schedules_is_a_clean_error(sqlite_url: str) -> None:
    assert_clean_error(redrive("scheduler", APP, url=sqlite_url), "CONFIG_INVALID", "declares no schedules")


def test_an_unknown_task_name(sqlite_url: str) -> None:
    assert_clean_error(redrive("enqueue", APP, "no_such_task", url=sqlite_url),
                       "UNKNOWN_TASK", "'no_such_task'", "record")
    with pytest.raises(UnknownTask, match="no task named 'nope'"):
        App("memory://").enqueue("nope")


def test_arguments_that_are_not_json(sqlite_url: str) -> None:
    result = redrive("enqueue", APP, "record", "--args", "[1,", url=sqlite_url)
    assert result.returncode == 2 and "not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr
    assert_clean_error(redrive("enqueue", APP, "record", "--args", '{"a": 1}', url=sqlite_url),
                       "CONFIG_INVALID", "--args must be a JSON array")
    app = App("memory://")
    app.task(lambda when: None, name="remind")
    with pytest.raises(ArgumentsNotSerializable, match="not JSON-serialisable: Object of type set"):
        app.enqueue("remind", args=[{1, 2}])
    with pytest.raises(ArgumentsNotSerializable, match="kwargs"):
        app.enqueue("remind", kwargs={"when": float("nan")})
    assert app.client.jobs().items == []  # nothing half-written


@pytest.mark.parametrize(
    ("url", "code", "phrase"),
    [
        ("mysql://root@localhost/x", "CONFIG_INVALID", "unsupported database URL"),
        ("sqlite://relative.db", "CONFIG_INVALID", "malformed SQLite URL"),
        ("postgresql://postgres:hunter2@127.0.0.1:1/nowhere", "STORE_UNAVAILABLE",
         "cannot connect to PostgreSQL at 127.0.0.1:1/nowhere"),
        ("postgresql://127.0.0.1:5432/x?bogus=1", "CONFIG_INVALID", "malformed PostgreSQL URL"),
        ("postgresql://[::1/x", "CONFIG_INVALID", "malformed PostgreSQL URL"),
        # a malformed URL's password is not echoed back, as written or decoded
        ("postgresql://u:hunter2@[::1", "CONFIG_INVALID", "malformed PostgreSQL URL"),
        ("postgresql://u:hun%zzter2@h/db", "CONFIG_INVALID", "malformed PostgreSQL URL"),
        ("postgresql://u:hunter2%zz@h/db", "CONFIG_INVALID", "malformed PostgreSQL URL"),
        # an operator's read never creates a database: a mistyped path is an error
        ("sqlite:////no/such/dir/redrive.db", "CONFIG_INVALID", "no SQLite database at /no/such/dir/redrive.db"),
    ],
)
def test_a_bad_or_unreachable_database_url(url: str, code: str, phrase: str) -> None:
    result = redrive("jobs", "list", "--database-url", url)
    assert_clean_error(result, code, phrase)
    assert "hunter2" not in result.stderr and "hun%zzter2" not in result.stderr


def test_a_schema_older_than_the_code_says_to_migrate(pg_empty_url: str) -> None:
    assert_clean_error(redrive("jobs", "list", url=pg_empty_url), "SCHEMA_OUTDATED", "run `redrive migrate`")
    assert_clean_error(redrive("worker", APP, url=pg_empty_url), "SCHEMA_OUTDATED", "redrive migrate")
    migrated = redrive("migrate", url=pg_empty_url)
    assert migrated.returncode == 0 and f"applied migrations {[m.version for m in load_migrations('redrive.store.postgres')]}" in migrated.stdout
    assert redrive("migrate", url=pg_empty_url).stdout.strip() == "schema is up to date"
    assert redrive("jobs", "list", url=pg_empty_url).returncode == 0


def test_a_bad_app_path_and_a_missing_job(sqlite_url: str) -> None:
    assert_clean_error(redrive("worker", "tests.apps.drain", url=sqlite_url),
                       "CONFIG_INVALID", "package.module:app")
    assert_clean_error(redrive("worker", "tests.apps.nothing:app", url=sqlite_url),
                       "CONFIG_INVALID", "cannot import 'tests.apps.nothing'")
    assert_clean_error(redrive("jobs", "show", "not-an-id", url=sqlite_url), "CONFIG_INVALID",
                       "no SQLite database at")  # a read of a mistyped path creates nothing
    App(sqlite_url).store.close()
    assert_clean_error(redrive("jobs", "show", "not-an-id", url=sqlite_url), "JOB_NOT_FOUND")
    assert_clean_error(redrive("jobs", "show", "00000000-0000-0000-0000-000000000000", url=sqlite_url),
                       "JOB_NOT_FOUND")


def test_dead_letter_and_retry_commands_fail_cleanly(sqlite_url: str) -> None:
    made = redrive("enqueue", APP, "record", "--args", '["k"]', url=sqlite_url)
    job_id = made.stdout.strip()
    assert_clean_error(redrive("jobs", "retry", job_id, url=sqlite_url),
                       "ILLEGAL_TRANSITION", "only a failed job can be retried")
    assert_clean_error(redrive("jobs", "retry", "not-a-uuid", url=sqlite_url), "JOB_NOT_FOUND")
    assert_clean_error(redrive("dead", "show", "x1", url=sqlite_url), "DEAD_LETTER_NOT_FOUND")
    assert_clean_error(redrive("dead", "show", "42", url=sqlite_url), "DEAD_LETTER_NOT_FOUND", "42")
    assert_clean_error(redrive("dead", "note", "42", "  ", url=sqlite_url), "CONFIG_INVALID", "non-empty")
    assert_clean_error(redrive("dead", "note", "42", "checked", url=sqlite_url), "DEAD_LETTER_NOT_FOUND")
    assert_clean_error(redrive("dead", "list", "--limit", "0", url=sqlite_url), "CONFIG_INVALID", "limit")
    empty = redrive("dead", "list", "--json", url=sqlite_url)
    assert empty.returncode == 0 and empty.stdout == ""


def test_breakers_can_be_listed_and_forced(sqlite_url: str) -> None:
    gateway = "tests.apps.gateway:app"
    App(sqlite_url).store.close()
    assert_clean_error(redrive("breakers", "open", "nope", url=sqlite_url),
                       "UNKNOWN_DEPENDENCY", "'nope'", "pass --app")
    assert_clean_error(redrive("breakers", "open", "nope", "--app", gateway, url=sqlite_url),
                       "UNKNOWN_DEPENDENCY", "gateway, gateway_ff")
    opened = redrive("breakers", "open", "gateway", "--app", gateway, "--by", "ops", url=sqlite_url)
    assert opened.returncode == 0 and opened.stdout.strip() == "breaker gateway is open"
    listed = redrive("breakers", "list", "--json", url=sqlite_url)
    (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (row["name"], row["state"], row["forced"]) == ("gateway", "open", True)
    # once a breaker is in the store, the name is known without the app
    closed = redrive("breakers", "close", "gateway", url=sqlite_url)
    assert closed.returncode == 0 and closed.stdout.strip() == "breaker gateway is closed"
    table = redrive("breakers", "list", "--app", gateway, url=sqlite_url).stdout
    assert "gateway_ff" in table and "closed" in table


def test_prune_deletes_old_history_and_refuses_a_missing_or_bad_age(sqlite_url: str) -> None:
    from redrive.core.transitions import Completion
    from redrive.testing import applied, claim_one

    app = App(sqlite_url)
    app.task(lambda: None, name="t")
    done = app.enqueue("t").job.id
    applied(app.store.jobs_finish([Completion(claim_one(app.store).lease, None)]))
    waiting = app.enqueue("t").job.id
    app.close()
    assert_clean_error(redrive("prune", url=sqlite_url), "CONFIG_INVALID", "positive age")
    for age in ("soon", "inf", "1e99d"):
        bad = redrive("prune", "--older-than", age, url=sqlite_url)
        assert bad.returncode == 2 and f"'{age}' is not a duration" in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr
    kept = redrive("prune", "--older-than", "1h", url=sqlite_url)
    assert (kept.returncode, kept.stdout) == (0, "pruned 0 finished jobs\n"), kept.stderr
    pruned = redrive("prune", "--older-than", "0.001s", url=sqlite_url)
    assert (pruned.returncode, pruned.stdout) == (0, "pruned 1 finished job\n"), pruned.stderr
    listed = redrive("jobs", "list", "--json", url=sqlite_url)
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == [str(waiting)]
    assert str(done) not in listed.stdout


def test_version_and_options_before_or_after_the_command(sqlite_url: str, tmp_path) -> None:
    version = redrive("--version")
    assert version.returncode == 0 and version.stdout.startswith("redrive ")
    made = redrive("enqueue", APP, "record", "--args", '["k"]', url=sqlite_url)
    assert made.returncode == 0, made.stderr
    other = f"sqlite:///{tmp_path / 'other.db'}"
    App(other).store.close()
    for args in (["--database-url", sqlite_url, "--log-level", "warning", "jobs", "list", "--json"],
                 ["jobs", "list", "--json", "--database-url", sqlite_url, "--log-level", "warning"]):
        listed = redrive(*args, url=other)  # the flag wins over REDRIVE_DATABASE_URL
        assert listed.returncode == 0, listed.stderr
        assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == [made.stdout.strip()]


def test_the_app_names_the_database_for_every_command(tmp_path) -> None:
    """An app that sets its URL in code: every verb finds its database through
    --app or REDRIVE_APP, also from a .env file, and never a stray redrive.db."""
    database = tmp_path / "app.db"
    (tmp_path / "coded.py").write_text(
        "from redrive import App\n"
        f"app = App('sqlite:///{database}')\n"
        "app.task(lambda n: n, name='double')\n")
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{tmp_path}"}
    env.pop("REDRIVE_DATABASE_URL", None)

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "redrive", *args], cwd=tmp_path, env={**env, **extra},
                              capture_output=True, text=True, timeout=60)

    made = run("enqueue", "coded:app", "double", "--args", "[2]")
    assert made.returncode == 0, made.stderr
    job_id = made.stdout.strip()
    for listed in (run("jobs", "list", "--json", "--app", "coded:app"),
                   run("--app", "coded:app", "jobs", "show", job_id, "--json"),
                   run("jobs", "list", "--json", REDRIVE_APP="coded:app")):
        assert listed.returncode == 0, listed.stderr
        assert job_id in listed.stdout
    (tmp_path / ".env").write_text("REDRIVE_APP=coded:app\n")
    from_dotenv = run("queues", "--json")
    assert from_dotenv.returncode == 0 and '"queue": "default"' in from_dotenv.stdout, from_dotenv.stderr
    assert not (tmp_path / "redrive.db").exists()  # nothing went to a default database
    (tmp_path / ".env").unlink()
    assert_clean_error(run("worker"), "CONFIG_INVALID", "needs your app")


def test_jobs_list_shows_times_and_the_error_only_of_failed_jobs(sqlite_url: str) -> None:
    from datetime import timedelta

    from redrive.core.transitions import Completion, FailNow, RetryLater
    from redrive.testing import applied, claim_one

    app = App(sqlite_url)
    app.task(lambda: None, name="t")
    recovered, failed = app.enqueue("t").job.id, app.enqueue("t").job.id
    store = app.store
    first = claim_one(store)
    applied(store.jobs_finish([RetryLater(first.lease, timedelta(0), "UPSTREAM_5XX", "503")]))
    second = claim_one(store)
    applied(store.jobs_finish([FailNow(second.lease, "NOT_FOUND", "gone")]))
    applied(store.jobs_finish([Completion(claim_one(store).lease, None)]))
    app.close()
    rows = {line.split()[0]: line for line in redrive("jobs", "list", url=sqlite_url).stdout.splitlines()[1:]}
    assert {first.id, second.id} == {recovered, failed}
    done, broken = rows[str(first.id)], rows[str(second.id)]
    assert "succeeded" in done and "UPSTREAM_5XX" not in done  # a past retry is not its state
    assert "failed" in broken and broken.rstrip().endswith("NOT_FOUND")
    header = redrive("jobs", "list", url=sqlite_url).stdout.splitlines()[0]
    assert "created (UTC)" in header and "took" in header


def test_an_operator_reveals_the_arguments_and_it_is_on_record(sqlite_url: str) -> None:
    made = redrive("enqueue", APP, "record", "--args", '["ann@example.com"]', url=sqlite_url)
    job_id = made.stdout.strip()
    hidden = json.loads(redrive("jobs", "show", job_id, "--json", url=sqlite_url).stdout)
    assert hidden["args"] == ["[EMAIL]"] and hidden["audit"] == []
    shown = json.loads(redrive("jobs", "show", job_id, "--json", "--reveal", "--by", "ops:carol",
                               url=sqlite_url).stdout)
    assert shown["args"] == ["ann@example.com"]
    assert [(a["by"], a["action"]) for a in shown["audit"]] == [("ops:carol", "reveal")]
    table = redrive("jobs", "show", job_id, url=sqlite_url).stdout
    assert "ops:carol reveal" in table and "ann@example.com" not in table


def test_cancel_a_job_and_pause_a_queue_from_the_command_line(sqlite_url: str) -> None:
    job_id = redrive("enqueue", APP, "record", "--args", '["k1"]', "--delay", "1h", url=sqlite_url).stdout.strip()
    cancelled = redrive("jobs", "cancel", job_id, "--by", "ana", url=sqlite_url)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.strip() == f"{job_id} cancelled"
    assert "-> cancelled" in redrive("jobs", "show", job_id, url=sqlite_url).stdout
    assert_clean_error(redrive("jobs", "cancel", job_id, url=sqlite_url), "ILLEGAL_TRANSITION", "is cancelled")

    paused = redrive("queues", "pause", "email", "--by", "ana", url=sqlite_url)
    assert paused.returncode == 0 and "queue email paused" in paused.stdout, paused.stderr
    assert "already paused" in redrive("queues", "pause", "email", url=sqlite_url).stdout
    (row,) = [json.loads(line) for line in redrive("queues", "--json", url=sqlite_url).stdout.splitlines()]
    assert (row["queue"], row["paused"], row["paused_by"]) == ("email", True, "ana")
    assert "by ana" in redrive("queues", url=sqlite_url).stdout
    assert redrive("queues", "resume", "email", url=sqlite_url).stdout.strip() == "queue email resumed"
    assert redrive("queues", "--json", url=sqlite_url).stdout.strip() == ""


def test_a_worker_queue_limit_must_be_a_positive_number(sqlite_url: str) -> None:
    result = redrive("worker", APP, "--queue", "email=0", url=sqlite_url)
    assert result.returncode == 2 and "the limit after '=' must be a whole number of at least 1" in result.stderr


def test_careless_inputs_get_one_line_errors_never_a_default_or_a_traceback(sqlite_url: str, tmp_path) -> None:
    made = redrive("enqueue", APP, "record", "--args", '["k"]', url=sqlite_url)  # the database exists
    assert made.returncode == 0, made.stderr
    refused = [
        (("enqueue", APP, "record", "--max-attempts", "0"), "CONFIG_INVALID", "max_attempts must be"),
        (("enqueue", APP, "record", "--queue", ""), "CONFIG_INVALID", "queue name must be a non-empty string"),
        (("enqueue", APP, "record", "--args", '"abc"'), "CONFIG_INVALID", "--args must be a JSON array"),
        (("enqueue", APP, "record", "--args", '{"a": 1}'), "CONFIG_INVALID", "--args must be a JSON array"),
        (("enqueue", APP, "record", "--kwargs", "[1]"), "CONFIG_INVALID", "--kwargs must be a JSON object"),
        (("enqueue", APP, "record", "--args", "[" * 100 + "]" * 100), "ARGS_NOT_JSON",
         "job args: nested deeper than 64 levels"),
        (("enqueue", APP, "record", "--database-url", "memory://"), "CONFIG_INVALID", "memory://"),
        (("dead", "show", "99999999999999999999"), "DEAD_LETTER_NOT_FOUND", "is not a dead letter id"),
        (("worker", APP, "-c", "100000"), "CONFIG_INVALID", "worker_concurrency must be from 1 to 1000"),
    ]
    for args, code, phrase in refused:
        assert_clean_error(redrive(*args, url=sqlite_url), code, phrase)
    # JSON nested past what the parser takes is an argument error, not a traceback
    deep = redrive("enqueue", APP, "record", "--args", "[" * 5000 + "]" * 5000, url=sqlite_url)
    assert deep.returncode == 2 and "nested too deep to read" in deep.stderr and "Traceback" not in deep.stderr
    assert_clean_error(redrive_process("worker", APP, env={"WORKER_LEASE_TTL_SEC": "inf"}, url=sqlite_url),
                       "CONFIG_INVALID", "'inf' is not a duration")
    # Nothing was enqueued by any of them
    listed = redrive("jobs", "list", "--json", url=sqlite_url).stdout.splitlines()
    assert len(listed) == 1


def test_an_operator_read_never_touches_another_applications_sqlite_file(tmp_path) -> None:
    import sqlite3

    theirs = tmp_path / "crm.db"
    with sqlite3.connect(theirs) as conn:
        conn.execute("CREATE TABLE customer (id INTEGER PRIMARY KEY)")
    result = redrive("jobs", "list", url=f"sqlite:///{theirs}")
    assert_clean_error(result, "CONFIG_INVALID", "is not one of redrive's")
    with sqlite3.connect(theirs) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert tables == ["customer"]


def test_a_log_format_that_is_not_ours_is_a_one_line_error(tmp_path) -> None:
    result = redrive("--log-format", "xml", "queues", "--database-url", f"sqlite:///{tmp_path / 'r.db'}")
    assert_clean_error(result, "CONFIG_INVALID", "text or json")
