"""What a view does: save the order and enqueue its receipt in one transaction."""

from django.db import connection, transaction

from redrive.contrib.django import on_commit
from shop.models import Order
from shop.tasks import send_receipt


def place_order(order_id: int, *, fail: bool = False) -> None:
    with transaction.atomic():
        Order.objects.create(id=order_id, email=f"{order_id}@example.com")
        send_receipt.options(conn=connection).enqueue(order_id)
        if fail:
            raise RuntimeError("the order could not be saved")


def record_payment(order_id: int, *, fail: bool = False) -> None:
    """A write to the ledger, another database than redrive's: the receipt is enqueued once it commits."""
    with transaction.atomic(using="ledger"):
        on_commit(send_receipt, order_id, using="ledger")
        if fail:
            raise RuntimeError("the payment could not be recorded")
