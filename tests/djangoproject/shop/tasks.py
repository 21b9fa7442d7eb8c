from redrive.contrib.django import app as redrive_app
from shop.models import Order, Receipt

app = redrive_app()  # on Django's default database


@app.task
def send_receipt(order_id: int) -> dict:
    order = Order.objects.get(id=order_id)
    receipt = Receipt.objects.create(order=order)
    return {"order": order.id, "email": order.email, "receipt": receipt.id}
