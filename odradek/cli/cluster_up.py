"""``odradek cluster up``: a local ZooKeeper and N brokers in cluster mode, for development
(the processes are watched by cli/cluster_supervisor.py; ``odradek cluster restart-broker``
reaches them through cli/cluster_control.py)."""

from __future__ import annotations

import re
import signal
import sys
import threading
from pathlib import Path

import click

from odradek.cli.cluster_supervisor import RESTART_POLICIES


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
@click.option(
    "--console-port",
    default=9644,
    show_default=True,
    help="HTTP port (console, /metrics) of broker 1; broker N gets PORT+N-1; 0 picks free ports.",
)
@click.option("--racks", default=None, help="Comma-separated broker.rack per broker, e.g. a,a,b (rack-aware placement).")
@click.option(
    "--restart",
    "restart_mode",
    type=click.Choice(RESTART_POLICIES),
    default="never",
    show_default=True,
    help="Start a broker that exited again by itself: on-failure (a crash, a kill) or always.",
)
@click.option(
    "--restart-delay",
    default="2s",
    show_default=True,
    metavar="DURATION",
    help="How long after the exit --restart starts it (2s, 500ms, 1m); doubles while it keeps failing at once.",
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="A broker config for every broker (repeatable), e.g. --override default.replication.factor=3.",
)
def up(brokers, data_dir, base_port, zookeeper_port, console_port, racks, restart_mode, restart_delay, overrides):
    """Start ZooKeeper and a cluster of brokers here, until Ctrl-C.

    Debian's zookeeper package (apt-get install zookeeper) runs the ZooKeeper; each broker is an
    ``odradek server`` process with zookeeper.connect=127.0.0.1:ZKPORT/odradek, broker.id 1..N
    and its own log dir and log file under --data-dir. Once the brokers form a cluster, a table
    gives each one's pid, Kafka address, console URL and log file.

    A broker that exits (try kill -9 PID) is reported in one line and the others keep running:
    start it again with `odradek cluster restart-broker N` from another terminal, or let
    --restart on-failure do it. Ctrl-C (or SIGTERM) stops every broker (each moves its
    leaderships away first) and then ZooKeeper. Run it again with the same --data-dir to get
    the same cluster back, also after a kill -9 of everything: the registrations the killed
    brokers left in ZooKeeper are cleared before the brokers start.

    \b
    Examples:
      odradek cluster up
      odradek cluster up --brokers 5 --racks a,a,b,b,c
      odradek cluster up --override default.replication.factor=3 --override min.insync.replicas=2
      odradek cluster up --restart on-failure --restart-delay 5s
    """
    from odradek.cli.cluster_control import ClusterAlreadyRunningError, ControlServer
    from odradek.cli.cluster_supervisor import LocalCluster, RestartPolicy
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
    policy = RestartPolicy(restart_mode, parse_delay_s(restart_delay))
    # Ctrl-C stops every broker at once: the last ones lead partitions with nowhere to go and
    # retry their controlled shutdown (Kafka's rule); a development cluster should stop in seconds.
    settings.setdefault("controlled.shutdown.retry.backoff.ms", "500")
    root = Path(data_dir).absolute()
    root.mkdir(parents=True, exist_ok=True)

    control = ControlServer(root)  # first: it also tells whether another cluster up runs here
    try:
        control.start()
    except ClusterAlreadyRunningError as exc:
        raise click.ClickException(str(exc)) from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    zookeeper = ZooKeeperServer(root / "zookeeper", port=zookeeper_port)
    members = {}
    for i in range(brokers):
        node_id = i + 1
        broker_settings = {"zookeeper.connect": f"{zookeeper.connect_string}/odradek", **settings}
        if rack_list:
            broker_settings["broker.rack"] = rack_list[i]
        if console_port and "http.listeners" not in broker_settings:
            broker_settings["http.listeners"] = f"http://127.0.0.1:{console_port + i}"
        if i == 0:  # one schema registry for the cluster, beside the first broker
            broker_settings.setdefault("schema.registry.listeners", "http://127.0.0.1:8081")
        members[node_id] = BrokerProcess(
            root / f"broker-{node_id}",
            port=base_port + i,
            node_id=node_id,
            overrides=broker_settings,
            log_path=root / f"broker-{node_id}.log",
        )
    cluster = LocalCluster(root, zookeeper, members, policy)
    try:
        try:
            zookeeper.start()
        except (ZooKeeperNotInstalledError, ZooKeeperStartError, OSError) as exc:
            raise click.ClickException(f"ZooKeeper did not start: {exc}") from None
        click.echo(f"zookeeper  {zookeeper.connect_string}  data {zookeeper.data_dir}")
        click.echo(f"starting {brokers} broker{'s' if brokers > 1 else ''} ...")
        cluster.start_brokers()
        cluster.wait_until_formed()
        _print_brokers(cluster, rack_list)
        click.echo(f"bootstrap servers: {cluster.bootstrap_servers()}")
        click.echo(f"`odradek cluster restart-broker N --data-dir {root}` starts broker N again.")
        registry = members[1].overrides.get("schema.registry.listeners", "")
        if registry and not registry.rstrip("/").endswith(":0"):
            click.echo(f"schema registry: {registry.split(',')[0].strip()} (beside broker 1)")
        click.echo("Ctrl-C stops the cluster.")
        while not stop.is_set():
            control.serve_pending(cluster.handle_request, wait_s=0.2)
            if not stop.is_set():
                cluster.check()
    finally:
        control.close()
        cluster.stop()
    sys.exit(0)


def _print_brokers(cluster, rack_list: list[str] | None) -> None:
    """The table: BROKER PID KAFKA [RACK] CONSOLE LOG."""
    from odradek.cli.common import Session

    columns = ["BROKER", "PID", "KAFKA", "CONSOLE", "LOG"]
    rows = [
        [node_id, b.proc.pid, b.bootstrap_servers, b.http_url or "-", str(b.log_path)]
        for node_id, b in cluster.brokers.items()
    ]
    if rack_list:
        columns.insert(3, "RACK")
        for row, rack in zip(rows, rack_list, strict=True):
            row.insert(3, rack)
    Session(cluster.bootstrap_servers(), None, "table").table(columns, rows)


_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")


def parse_delay_s(text: str) -> float:
    """``2s``, ``500ms``, ``1m`` or plain seconds."""
    m = _DELAY.match(text)
    if not m:
        raise click.BadParameter(f"{text!r}: expected a duration such as 2s, 500ms or 1m", param_hint="--restart-delay")
    return float(m.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[m.group(2) or "s"]
