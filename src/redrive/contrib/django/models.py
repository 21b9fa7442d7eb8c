"""No Django models: redrive's tables are its own, made and migrated by
redrive (``apps.py`` runs its migrations after ``manage.py migrate``).
The module exists because Django tells only apps with one that it migrated."""
