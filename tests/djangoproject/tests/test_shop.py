"""The shop's tests with pytest-django and redrive's testing kit: the jobs
land in Django's test database, in the view's own transaction, and the
testing kit runs them there (docs/django.md)."""

import pytest
from django.db import connections
from shop.models import Order, Receipt
from shop.tasks import app, send_receipt
from shop.views import place_order, record_payment

from redrive.testing import assert_enqueued, drain, enqueued_jobs

# Committed transactions, as in production: a job exists only once its transaction commits.
pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "ledger"])


@pytest.fixture(autouse=True)
def jobs(redrive_isolate):
    redrive_isolate(app, database="app")  # the test database, emptied of jobs before each test


def test_the_jobs_live_in_the_test_database():
    name = connections["default"].settings_dict["NAME"]
    assert "test" in name and name in app.settings.database_url


def test_a_failed_order_leaves_neither_row_nor_job_and_a_placed_one_gets_its_receipt():
    with pytest.raises(RuntimeError):
        place_order(1, fail=True)
    place_order(2)
    assert list(Order.objects.values_list("id", flat=True)) == [2]
    assert_enqueued(app, send_receipt, args=[2], count=1)
    assert drain(app).succeeded == 1
    (job,) = enqueued_jobs(app, send_receipt)
    (receipt,) = Receipt.objects.all()
    assert job.result == {"order": 2, "email": "2@example.com", "receipt": receipt.id}


def test_a_task_that_reads_and_writes_models_runs_under_drain_as_under_a_worker():
    """``drain`` runs a sync task in the test's thread, with no event loop
    running there, as a worker's task thread: Django's ORM works in it."""
    place_order(5)
    place_order(6)
    done = drain(app)
    assert (done.succeeded, done.failed) == (2, 0), done.endings
    assert sorted(Receipt.objects.values_list("order_id", flat=True)) == [5, 6]


def test_a_payment_enqueues_its_receipt_once_the_ledger_commits_and_never_after_a_rollback():
    with pytest.raises(RuntimeError):
        record_payment(3, fail=True)
    assert enqueued_jobs(app, send_receipt) == []
    record_payment(4)
    assert_enqueued(app, send_receipt, args=[4], count=1)
