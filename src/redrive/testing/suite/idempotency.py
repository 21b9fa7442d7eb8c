"""Idempotent enqueue on every store: keys, versions, deterministic ids,
content dedupe, refusals that write nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from redrive import App, ConfigError, IdempotencyKeyReused, JobRequest, job_id_for
from redrive.core.states import Status
from redrive.core.transitions import Completion, FailNow
from redrive.store.port import Store
from redrive.testing import applied, claim_one, count_jobs


@pytest.fixture
def app(store: Store) -> App:
    app = App(store=store)

    @app.task
    def review(changelist: str, version: int) -> None:
        return None

    @app.task
    def convert(path: str) -> None:
        return None

    return app


def succeed(store: Store, result: object) -> None:
    job = claim_one(store)
    assert applied(store.jobs_finish([Completion(job.lease, result)])) == {job.lease}


def test_a_repeated_key_returns_the_first_job(app: App) -> None:
    first = app.enqueue("review", kwargs={"changelist": "cl-9", "version": 1}, idempotency_key="cl-9")
    again = app.enqueue("review", kwargs={"changelist": "cl-9", "version": 1}, idempotency_key="cl-9")
    assert not first.duplicate and again.duplicate
    assert again.job.id == first.job.id == job_id_for("review", "cl-9", 1)
    assert (first.job.idempotency_key, first.job.version) == ("cl-9", 1)
    assert count_jobs(app.store)[Status.QUEUED] == 1


def test_jobs_without_a_key_get_time_ordered_ids(app: App) -> None:
    one_by_one = [app.enqueue("convert", kwargs={"path": str(i)}).job.id for i in range(20)]
    batch = [r.job.id for r in app.enqueue_many([JobRequest("convert", kwargs={"path": "b"})] * 20)]
    made = one_by_one + batch
    assert {i.version for i in made} == {7}
    assert made == sorted(made) and len(set(made)) == 40
    assert [j.id for j in app.client.jobs(limit=100)] == sorted(made, reverse=True)


def test_keys_are_unique_per_owner_and_task(app: App) -> None:
    made = [
        app.enqueue("review", kwargs={"changelist": "a", "version": 1}, idempotency_key="k", owner="ann"),
        app.enqueue("review", kwargs={"changelist": "a", "version": 1}, idempotency_key="k", owner="bob"),
        app.enqueue("review", kwargs={"changelist": "a", "version": 1}, idempotency_key="k"),
        app.enqueue("convert", kwargs={"path": "a"}, idempotency_key="k", owner="ann"),
    ]
    assert not any(r.duplicate for r in made)
    assert len({r.job.id for r in made}) == 4
    assert made[0].job.id == job_id_for("review", "k", 1, owner="ann")


def test_the_same_key_with_other_arguments_is_refused_and_the_batch_not_written(app: App) -> None:
    app.enqueue("review", kwargs={"changelist": "cl-1", "version": 1}, idempotency_key="cl-1")
    batch = [
        JobRequest("convert", kwargs={"path": "fresh.pdf"}),
        JobRequest("review", kwargs={"changelist": "cl-OTHER", "version": 1}, idempotency_key="cl-1"),
    ]
    with pytest.raises(IdempotencyKeyReused) as refused:
        app.enqueue_many(batch)
    assert refused.value.code == "IDEMPOTENCY_KEY_REUSED"
    assert "cl-1" in str(refused.value) and "other arguments" in str(refused.value)
    assert sum(count_jobs(app.store).values()) == 1  # the fresh job was not written either


def test_a_succeeded_version_is_not_rerun_and_a_higher_version_is(app: App) -> None:
    v1 = app.enqueue("review", kwargs={"changelist": "cl-7", "version": 1}, idempotency_key="cl-7").job
    succeed(app.store, {"sent": 3})

    # Then the same version brings back the finished run and its result
    again = app.enqueue("review", kwargs={"changelist": "cl-7", "version": 1}, idempotency_key="cl-7")
    assert again.duplicate and again.job.id == v1.id
    assert (again.job.status, again.job.result) == (Status.SUCCEEDED, {"sent": 3})

    # A strictly higher version is a new run under the same key, with new arguments
    v2 = app.enqueue("review", kwargs={"changelist": "cl-7", "version": 2}, idempotency_key="cl-7", version=2)
    assert not v2.duplicate and v2.job.id == job_id_for("review", "cl-7", 2) != v1.id
    assert (v2.job.status, v2.job.version) == (Status.QUEUED, 2)
    assert app.enqueue("review", kwargs={"changelist": "cl-7", "version": 2},
                       idempotency_key="cl-7", version=2).job.id == v2.job.id

    # A late request for an older version gets the newest run, not a rerun
    late = app.enqueue("review", kwargs={"changelist": "cl-7", "version": 1}, idempotency_key="cl-7")
    assert late.duplicate and late.job.id == v2.job.id
    assert sum(count_jobs(app.store).values()) == 2


def test_content_dedupe_returns_a_live_or_succeeded_twin_and_replaces_a_failed_one(app: App) -> None:
    upload = ("session-1", "5e88489…sha", "mapping-v2", 1024)
    first = app.enqueue("convert", kwargs={"path": "/up/a.pdf"}, dedupe=upload)
    # A re-POST of the same content (even under another file name) finds the queued twin
    twin = app.enqueue("convert", kwargs={"path": "/up/a (1).pdf"}, dedupe=upload)
    assert twin.duplicate and twin.job.id == first.job.id

    # When the twin fails for good, the same content gets a new run
    job = claim_one(app.store)
    assert job.id == first.job.id
    applied(app.store.jobs_finish([FailNow(job.lease, "GW_5XX", "gateway down", retryable=True)]))
    retry = app.enqueue("convert", kwargs={"path": "/up/a.pdf"}, dedupe=upload)
    assert not retry.duplicate and retry.job.id != first.job.id

    # And once that run succeeded, the content is done
    claimed = claim_one(app.store)
    applied(app.store.jobs_finish([Completion(claimed.lease, "/out/x.xml")]))
    done = app.enqueue("convert", kwargs={"path": "/up/a.pdf"}, dedupe=upload)
    assert done.duplicate and done.job.id == claimed.id == retry.job.id
    assert (done.job.status, done.job.result) == (Status.SUCCEEDED, "/out/x.xml")
    # Other content is other work
    other = app.enqueue("convert", kwargs={"path": "/up/a.pdf"}, dedupe=("session-1", "other", "mapping-v2", 9))
    assert not other.duplicate


@pytest.mark.parametrize(("options", "message"), [
    ({"idempotency_key": ""}, "non-empty"),
    ({"idempotency_key": "   "}, "non-empty"),
    ({"idempotency_key": 42}, "non-empty string"),
    ({"idempotency_key": "k" * 256}, "at most 255 characters, not 256"),
    ({"idempotency_key": "k", "version": 0}, "positive integer"),
    ({"idempotency_key": "k", "version": -3}, "positive integer"),
    ({"idempotency_key": "k", "version": True}, "positive integer"),
    ({"idempotency_key": "k", "version": "2"}, "positive integer"),
    ({"idempotency_key": "k", "version": 1.5}, "positive integer"),
    ({"version": 2}, "needs an idempotency_key"),
    ({"idempotency_key": "k", "dedupe": ("a",)}, "not both"),
    ({"dedupe": ()}, "non-empty tuple"),
    ({"dedupe": "abc"}, "non-empty tuple"),
    ({"dedupe": (object(),)}, "must be JSON"),
])
def test_bad_keys_versions_and_dedupe_tuples_are_config_errors(app: App, options: dict, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        app.enqueue("convert", kwargs={"path": "x"}, **options)
    assert refused.value.code == "CONFIG_INVALID" and message in str(refused.value)
    assert sum(count_jobs(app.store).values()) == 0


def test_a_key_at_the_limit_is_accepted_and_a_batch_may_not_repeat_a_key(app: App) -> None:
    assert not app.enqueue("convert", kwargs={"path": "x"}, idempotency_key="k" * 255).duplicate
    twice = [JobRequest("convert", kwargs={"path": "y"}, idempotency_key="again")] * 2
    with pytest.raises(ConfigError, match="once"):
        app.enqueue_many(twice)


BIG = 400  # more than one PostgreSQL enqueue statement's worth (it pipelines several)


def test_a_big_batch_of_keyed_and_plain_jobs_answers_in_request_order(app: App) -> None:
    before = [app.enqueue("convert", kwargs={"path": str(i)}, idempotency_key=f"k-{i}").job for i in (5, 250)]
    batch = [
        JobRequest("convert", kwargs={"path": str(i)}, idempotency_key=f"k-{i}") if i % 5 == 0
        else JobRequest("convert", kwargs={"path": str(i)})
        for i in range(BIG)
    ]
    made = app.enqueue_many(batch)
    assert [r.job.kwargs["path"] for r in made] == [str(i) for i in range(BIG)]
    assert [i for i, r in enumerate(made) if r.duplicate] == [5, 250]
    assert [made[5].job.id, made[250].job.id] == [j.id for j in before]
    assert [r.job.idempotency_key for r in made[:3]] == ["k-0", None, None]
    assert sum(count_jobs(app.store).values()) == BIG
    for r in (made[0], made[1], made[BIG - 1]):  # what enqueue answered is what was stored
        assert app.client.job(r.job.id) == r.job
        assert [e.to_status for e in app.client.job_events(r.job.id)] == ["queued"]


@pytest.mark.parametrize("bad", [
    JobRequest("convert", kwargs={"path": object()}),
    JobRequest("convert", kwargs={"path": "x"}, priority=10**6),
    JobRequest("convert", kwargs={"path": "0"}, idempotency_key="k-0"),  # the batch's own key again
])
def test_a_request_refused_late_in_a_big_batch_leaves_nothing_written(app: App, bad: JobRequest) -> None:
    batch = [JobRequest("convert", kwargs={"path": str(i)}, idempotency_key=f"k-{i}") if i % 5 == 0
             else JobRequest("convert", kwargs={"path": str(i)}) for i in range(BIG)]
    with pytest.raises(ConfigError):
        app.enqueue_many([*batch, bad])
    assert sum(count_jobs(app.store).values()) == 0
    assert app.enqueue_many(batch[:3])[2].job.kwargs == {"path": "2"}  # and the store still works


def test_a_delayed_keyed_job_is_scheduled(app: App) -> None:
    made = app.enqueue("convert", kwargs={"path": "x"}, idempotency_key="later", delay=timedelta(hours=1))
    assert made.job.status is Status.SCHEDULED
