"""``odradek cluster``: the cluster id, the controller and the brokers (kafka-cluster.sh,
kafka-broker-api-versions.sh); ``odradek cluster up`` starts a local cluster (cli/cluster_up.py) and
``odradek cluster restart-broker`` starts one of its brokers again (cli/cluster_control.py)."""

from __future__ import annotations

import click

from odradek.cli.cluster_control import restart_broker
from odradek.cli.cluster_up import up
from odradek.cli.common import client_command


@click.group(invoke_without_command=True)
@click.option(
    "--api-versions", is_flag=True, help="Also list the API versions the bootstrap broker supports."
)
@client_command
def cluster(session, api_versions):
    """Show the cluster id, the controller and every broker (with its rack).

    \b
    Examples:
      odradek cluster
      odradek cluster --api-versions
      odradek cluster -b broker1:9092 -o json
      odradek cluster up --brokers 3      (start a local cluster: see odradek cluster up --help)
      odradek cluster restart-broker 2    (start broker 2 of that cluster again)
    """
    if click.get_current_context().invoked_subcommand is not None:
        return
    with session.admin() as admin:
        desc = admin.describe_cluster()
        versions = admin.api_versions() if api_versions else None
    data = {
        "cluster_id": desc.cluster_id,
        "controller_id": desc.controller_id,
        "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in desc.brokers],
    }
    if versions is not None:
        from odradek.protocol.messages import api_name

        data["api_versions"] = [
            {"api_key": k, "name": api_name(k), "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(versions.items())
        ]
    if session.json:
        session.print_json(data)
        return
    click.echo(f"Cluster id: {desc.cluster_id}")
    click.echo(f"Controller: {desc.controller_id}")
    click.echo()
    session.table(
        ["ID", "HOST", "PORT", "RACK", "ROLE"],
        [
            [b.node_id, b.host, b.port, b.rack, "controller" if b.node_id == desc.controller_id else ""]
            for b in desc.brokers
        ],
    )
    if versions is not None:
        click.echo()
        session.table(
            ["API", "KEY", "VERSIONS"],
            [
                [a["name"], a["api_key"], f"{a['min_version']}..{a['max_version']}"]
                for a in data["api_versions"]
            ],
        )


cluster.add_command(up)
cluster.add_command(restart_broker)
