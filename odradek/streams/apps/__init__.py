"""Ready Streams apps, run by ``odradek pipeline run NAME`` too (``pipeline/pipelines/__init__.py``
names them by module path, so the pipeline layer does not import streams)."""

from __future__ import annotations


def run_exactly_once(spark, config, topology, name: str, application_id: str) -> list:
    """``odradek pipeline run NAME``: ``topology`` on ``spark``, ``processing.guarantee=exactly_once_v2``,
    its checkpoints under ``<checkpoint>/<name>/<application_id>/`` (``config``: the pipeline's
    ``RunConfig``); returns its Spark queries."""
    from odradek.streams import KafkaStreams

    streams = KafkaStreams(
        topology,
        {
            "application.id": application_id,
            "bootstrap.servers": config.bootstrap_servers,
            "processing.guarantee": "exactly_once_v2",
            "state.dir": config.checkpoint_dir(name),
            "auto.offset.reset": config.starting_offsets,
        },
        spark=spark,
        trigger=config.spark_trigger(),
    )
    streams.start()
    return streams.queries()
