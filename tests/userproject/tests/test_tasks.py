"""The shop's tests of its tasks, with nothing but redrive's documented
testing kit (docs/testing-your-tasks.md)."""

from shop.tasks import RELAY_FAILURES, SENT, app, fulfil, place_order, send_receipt

from redrive.testing import assert_enqueued, drain, enqueued_jobs


def test_placing_an_order_enqueues_its_fulfilment_and_its_receipt(redrive_isolate):
    redrive_isolate(app)
    place_order(7, "ada@example.com", 1999)
    assert_enqueued(app, fulfil, args=[7, 1999], count=1)
    assert_enqueued(app, send_receipt, args=[7, "ada@example.com"], count=1)


def test_the_receipt_is_sent_once_the_relay_is_back(redrive_isolate):
    clock = redrive_isolate(app)
    SENT.clear()
    RELAY_FAILURES[:] = [2]
    send_receipt.enqueue(7, "ada@example.com")
    drained = drain(app, clock=clock)
    assert (drained.retried, drained.succeeded) == (2, 1)
    assert SENT == [("ada@example.com", 7)]


def test_a_zero_order_fails_for_good_and_a_good_one_is_shipped(redrive_isolate):
    clock = redrive_isolate(app)
    fulfil.enqueue(8, 0)
    fulfil.enqueue(9, 500)
    drain(app, clock=clock)
    (bad,) = enqueued_jobs(app, fulfil, args=[8, 0])
    (good,) = enqueued_jobs(app, fulfil, args=[9, 500])
    assert (bad.status, bad.error_code) == ("failed", "BAD_AMOUNT")
    assert good.result == {"charged": 500, "label": "L-9"}
