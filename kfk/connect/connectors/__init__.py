"""Connectors shipped with kfk (Kafka's FileStream connectors, under Kafka's class names too)."""
