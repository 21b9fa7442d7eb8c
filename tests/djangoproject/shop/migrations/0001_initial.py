from typing import ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies: ClassVar[list] = []
    operations: ClassVar[list] = [
        migrations.CreateModel(
            name="Order",
            fields=[("id", models.BigAutoField(primary_key=True, serialize=False)),
                    ("email", models.CharField(max_length=200))],
        ),
    ]
