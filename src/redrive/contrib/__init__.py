"""Integrations with the frameworks people build on (``redrive.contrib.django``)."""
