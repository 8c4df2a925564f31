"""``odradek cluster up``: a local ZooKeeper and N brokers in cluster mode, for development."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import click


@click.command("up")
@click.option("--brokers", "-n", default=3, show_default=True, type=click.IntRange(1, 64), help="How many brokers.")
@click.option(
    "--data-dir",
    default="./odradek-cluster",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where ZooKeeper and every broker keep their data and logs (kept between runs).",
)
@click.option("--port", "base_port", default=9092, show_default=True, help="Kafka port of broker 1; broker N gets PORT+N-1.")
@click.option("--zookeeper-port", default=2181, show_default=True, help="ZooKeeper's client port.")
@click.option("--racks", default=None, help="Comma-separated broker.rack per broker, e.g. a,a,b (rack-aware placement).")
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="A broker config for every broker (repeatable), e.g. --override default.replication.factor=3.",
)
def up(brokers, data_dir, base_port, zookeeper_port, racks, overrides):
    """Start ZooKeeper and a cluster of brokers here, until Ctrl-C.

    Debian's zookeeper package (apt-get install zookeeper) runs the ZooKeeper; each broker is an
    ``odradek server`` process with zookeeper.connect=127.0.0.1:ZKPORT/odradek, broker.id 1..N
    and its own log dir and log file under --data-dir. One line per broker says where it
    listens. Ctrl-C stops every broker (each moves its leaderships away first) and then
    ZooKeeper. Run it again with the same --data-dir to get the same cluster back.

    \b
    Examples:
      odradek cluster up
      odradek cluster up --brokers 5 --racks a,a,b,b,c
      odradek cluster up --override default.replication.factor=3 --override min.insync.replicas=2
    """
    from odradek.testing.embedded_cluster import stop_all
    from odradek.testing.process import BrokerProcess
    from odradek.testing.zookeeper import ZooKeeperNotInstalledError, ZooKeeperServer, ZooKeeperStartError

    rack_list = [r.strip() for r in racks.split(",")] if racks else None
    if rack_list is not None and len(rack_list) != brokers:
        raise click.UsageError(f"--racks names {len(rack_list)} racks for {brokers} brokers; give one per broker")
    settings = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--override {item!r} is not KEY=VALUE")
        settings[key.strip()] = value.strip()
    # Ctrl-C stops every broker at once: the last ones lead partitions with nowhere to go and
    # retry their controlled shutdown (Kafka's rule); a development cluster should stop in seconds.
    settings.setdefault("controlled.shutdown.retry.backoff.ms", "500")
    root = Path(data_dir).absolute()
    root.mkdir(parents=True, exist_ok=True)

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    zookeeper = ZooKeeperServer(root / "zookeeper", port=zookeeper_port)
    started: list[BrokerProcess] = []
    try:
        try:
            zookeeper.start()
        except (ZooKeeperNotInstalledError, ZooKeeperStartError, OSError) as exc:
            raise click.ClickException(f"ZooKeeper did not start: {exc}") from None
        click.echo(f"zookeeper  {zookeeper.connect_string}  data {zookeeper.data_dir}")
        connect = f"{zookeeper.connect_string}/odradek"
        for i in range(brokers):
            node_id = i + 1
            broker_settings = {"zookeeper.connect": connect, **settings}
            if rack_list:
                broker_settings["broker.rack"] = rack_list[i]
            if i == 0:  # one schema registry for the cluster, beside the first broker
                broker_settings.setdefault("schema.registry.listeners", "http://127.0.0.1:8081")
            broker = BrokerProcess(
                root / f"broker-{node_id}",
                port=base_port + i,
                node_id=node_id,
                overrides=broker_settings,
                log_path=root / f"broker-{node_id}.log",
            )
            try:
                broker.start(60)
            except (RuntimeError, TimeoutError) as exc:
                tail = "\n".join(broker.log_text().splitlines()[-3:])
                raise click.ClickException(f"broker {node_id} did not start: {exc}\n{tail}") from None
            started.append(broker)
            rack = f"  rack {rack_list[i]}" if rack_list else ""
            click.echo(f"broker {node_id}   {broker.bootstrap_servers}{rack}  log {broker.log_path}")
        click.echo(f"bootstrap servers: {','.join(b.bootstrap_servers for b in started)}")
        registry = started[0].overrides.get("schema.registry.listeners", "") if started else ""
        if registry and not registry.rstrip("/").endswith(":0"):
            click.echo(f"schema registry: {registry.split(',')[0].strip()} (beside broker 1)")
        click.echo("Ctrl-C stops the cluster.")
        while not stop.wait(0.5):
            for broker in started:
                if broker.proc.poll() is not None:
                    click.echo(f"broker {broker.node_id} exited with code {broker.proc.returncode}; see {broker.log_path}", err=True)
                    stop.set()
    finally:
        running = [b for b in started if b.proc is not None and b.proc.poll() is None]
        codes = dict(zip((b.node_id for b in running), stop_all(running), strict=True))
        for broker in started:
            code = codes.get(broker.node_id, broker.proc.returncode)
            click.echo(f"broker {broker.node_id} stopped (exit code {code})")
        if zookeeper.running:
            zookeeper.stop()
            click.echo("zookeeper stopped")
    sys.exit(0)
