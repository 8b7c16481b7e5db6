"""Webhook receivers: one module per sender (``github``)."""
