"""``odradek connect standalone|distributed``: a Kafka Connect worker (``connect-standalone.sh``, ``connect-distributed.sh``)."""

from __future__ import annotations

import logging
import sys

import click


@click.group("connect")
def connect():
    """Run a Kafka Connect worker that Kafka's configuration files drive unchanged.

    \b
    Examples:
      odradek connect standalone connect-standalone.properties connect-file-source.properties
      odradek connect distributed connect-distributed.properties
    """


def _setup_logging(log_level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


@connect.command("standalone")
@click.argument("worker_properties", type=click.Path(exists=True, dir_okay=False))
@click.argument("connector_properties", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING or ERROR.")
def standalone(worker_properties, connector_properties, log_level):
    """One worker; source offsets in offset.storage.file.filename; connectors from files.

    WORKER_PROPERTIES is a connect-standalone.properties (bootstrap.servers, key.converter,
    value.converter, offset.storage.file.filename, ...); each CONNECTOR_PROPERTIES file holds one
    connector (name, connector.class, tasks.max and the connector's keys). The REST API
    serves on rest.port (8083) or listeners, where more connectors can be created.

    \b
    Examples:
      odradek connect standalone config/connect-standalone.properties \\
          config/connect-file-source.properties config/connect-file-sink.properties
    """
    _setup_logging(log_level)
    from odradek.config_def import ConfigError
    from odradek.connect.standalone import run
    from odradek.connect.worker_config import WorkerConfig
    from odradek.properties import PropertiesError, load_properties

    try:
        config = WorkerConfig.from_properties(load_properties(worker_properties), distributed=False)
        connectors = [load_properties(path) for path in connector_properties]
    except (PropertiesError, ConfigError, OSError) as exc:
        raise click.ClickException(f"{worker_properties}: {exc}") from None
    try:
        run(config, connectors)
    except OSError as exc:
        raise click.ClickException(f"cannot serve the REST API: {exc}") from None


@connect.command("distributed")
@click.argument("worker_properties", type=click.Path(exists=True, dir_okay=False))
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING or ERROR.")
def distributed(worker_properties, log_level):
    """A worker of a Connect cluster: state in Kafka topics, work shared by the workers of group.id.

    WORKER_PROPERTIES is a connect-distributed.properties: bootstrap.servers, group.id,
    key.converter, value.converter, config.storage.topic, offset.storage.topic,
    status.storage.topic (created compacted when missing, with their .replication.factor and
    .partitions), heartbeat.interval.ms, session.timeout.ms, scheduled.rebalance.max.delay.ms ...
    Start as many workers with the same group.id as you like; create connectors through any
    worker's REST API (writes go to the group's leader). A restarted worker resumes from the topics.

    \b
    Examples:
      odradek connect distributed config/connect-distributed.properties
      curl -X POST -H 'Content-Type: application/json' localhost:8083/connectors \\
          -d '{"name": "local-file-sink", "config": {"connector.class": "FileStreamSink", "file": "out.txt", "topics": "connect-test"}}'
    """
    _setup_logging(log_level)
    from odradek.config_def import ConfigError
    from odradek.connect.distributed import DistributedRuntime
    from odradek.connect.standalone import run
    from odradek.connect.worker_config import WorkerConfig
    from odradek.properties import PropertiesError, load_properties

    try:
        config = WorkerConfig.from_properties(load_properties(worker_properties), distributed=True)
    except (PropertiesError, ConfigError, OSError) as exc:
        raise click.ClickException(f"{worker_properties}: {exc}") from None
    try:
        run(config, [], DistributedRuntime)
    except OSError as exc:
        raise click.ClickException(f"cannot serve the REST API: {exc}") from None
