"""Lets Spark find the ``odradek`` data source by name, with no ``register()`` call.

Spark resolves ``format("odradek")`` by looking for a package ``pyspark_<name>`` that
exposes ``DefaultSource``; this is that package.
"""

from odradek.pipeline.source import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]
