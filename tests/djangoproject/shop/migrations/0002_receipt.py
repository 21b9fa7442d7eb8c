from typing import ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies: ClassVar[list] = [("shop", "0001_initial")]
    operations: ClassVar[list] = [
        migrations.CreateModel(
            name="Receipt",
            fields=[("id", models.BigAutoField(primary_key=True, serialize=False)),
                    ("order", models.ForeignKey(on_delete=models.deletion.CASCADE, to="shop.order"))],
        ),
    ]
