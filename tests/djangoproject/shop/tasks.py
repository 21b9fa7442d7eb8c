from redrive.contrib.django import app as redrive_app

app = redrive_app()  # on Django's default database


@app.task
def send_receipt(order_id: int) -> dict:
    return {"order": order_id, "sent": True}
