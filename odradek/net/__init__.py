"""Connections to brokers over asyncio, shared by everything that sends Kafka requests.

``odradek.net.connection.Connection`` is the transport around the sans-IO
``odradek.protocol.client_connection.ClientConnection``: the Python client uses it, and
so will the broker's replica fetchers and the controller's channel, which must not import
``odradek.client``. Layering: client, pipeline, broker, cluster → net → protocol.
"""
