"""What a view does: save the order and enqueue its receipt in one transaction."""

from django.db import connection, transaction

from shop.tasks import send_receipt


def place_order(order_id: int, *, fail: bool = False) -> None:
    with transaction.atomic():
        send_receipt.options(conn=connection).enqueue(order_id)
        if fail:
            raise RuntimeError("the order could not be saved")
