"""The HTTP side of Odradek: Prometheus metrics, health checks, a JSON API and a web console.

Served by the broker on its own event loop (``http.listeners``, default
http://127.0.0.1:9644), and by ``odradek console`` for a cluster running elsewhere.

* ``server``: the listener. Sockets are bound when the broker starts (so the port is
  known and logged), and aiohttp is imported in a worker thread and starts serving
  right after, so the broker's start-up is not delayed. Connections are capped.
* ``app``: the routes — ``/metrics``, ``/healthz``, ``/readyz``, ``/v1/...``, the console's
  page and its assets — over a *view* of the cluster.
* ``local_view``: the view inside a broker, read from its components (metadata image,
  replica manager, group coordinator), the same ones the Kafka handlers use.
* ``remote_view``: the view of any Kafka cluster through the Kafka protocol, with
  Odradek's own client.
* ``exporter``: the Prometheus text, rendered from the components' counters when scraped.
* ``authz``: the single check every console action passes.

Nothing here sits on the produce or fetch path.
"""
