from django.db import models


class Order(models.Model):
    email = models.CharField(max_length=200)


class Receipt(models.Model):
    """Written by the receipt's task: proof that it ran, with Django's ORM, once."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE)
