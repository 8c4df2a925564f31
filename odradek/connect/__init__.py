"""Kafka Connect in Odradek: the data model, converters, transforms, the worker and connectors."""
