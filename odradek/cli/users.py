"""``odradek users``: SCRAM users (create, delete, list), as kafka-configs.sh
``--entity-type users --add-config 'SCRAM-SHA-256=[password=...]'`` does, through
AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554)."""

from __future__ import annotations

import click

from odradek.cli.common import CliError, client_command

MECHANISMS = click.Choice(["SCRAM-SHA-256", "SCRAM-SHA-512"], case_sensitive=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def users():
    """Create, delete and list SCRAM users of SASL/SCRAM listeners.

    The password is salted on this machine; the broker stores only the salted keys.
    Connect as a user allowed to alter the cluster (--command-config with security.protocol
    and sasl.* when the listener needs it).

    \b
    Examples:
      odradek users create alice --mechanism SCRAM-SHA-512          # asks for the password
      printf 'secret' | odradek users create alice --password-stdin
      odradek users list
      odradek users delete alice
      odradek users list -b broker:9093 --command-config admin.properties

    \b
    The first SCRAM user (the admin who then creates the others) is made before the broker
    serves it. A single node: write it into the broker's data dir (the first of log.dirs)
    while the broker is stopped, as kafka-storage format --add-scram does:
      printf 'admin-secret' | odradek users create admin -m SCRAM-SHA-512 --password-stdin \\
          --data-dir ./odradek-data
    A cluster: write it to ZooKeeper (as kafka-configs --zookeeper does); the brokers' own
    SCRAM user is made the same way before they start:
      printf 'broker-secret' | odradek users create broker -m SCRAM-SHA-256 --password-stdin \\
          --zookeeper zk1:2181/odradek
    """


@users.command()
@click.argument("name")
@click.option("--mechanism", "-m", type=MECHANISMS, multiple=True, help="Default: SCRAM-SHA-256 and SCRAM-SHA-512.")
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin (else it is asked for).")
@click.option("--iterations", type=click.IntRange(4096, 16384), default=4096, show_default=True)
@click.option(
    "--zookeeper",
    metavar="HOST:PORT[/CHROOT]",
    help="Write the credentials straight to the cluster's ZooKeeper (/config/users/NAME) instead of "
    "asking a broker: how the brokers' own user is made before a SCRAM cluster starts.",
)
@click.option(
    "--data-dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Write the credentials into a stopped single-node broker's data dir (the first of its "
    "log.dirs; created if missing) instead of asking a broker: how the first admin of a "
    "SASL/SCRAM broker is made.",
)
@client_command
def create(session, name, mechanism, password_stdin, iterations, zookeeper, data_dir):
    """Add a SCRAM user, or set a new password for one (one credential per mechanism).

    \b
    Examples:
      odradek users create alice                                   # both mechanisms, asks twice
      printf 'secret' | odradek users create alice -m SCRAM-SHA-512 --password-stdin
      printf 'secret' | odradek users create broker -m SCRAM-SHA-256 --password-stdin --zookeeper zk:2181/odradek
      printf 'secret' | odradek users create admin -m SCRAM-SHA-512 --password-stdin --data-dir ./odradek-data
    """
    if zookeeper and data_dir:
        raise click.UsageError("give --zookeeper (a cluster) or --data-dir (a single node), not both")
    if password_stdin:
        password = click.get_text_stream("stdin").read().rstrip("\n")
    else:
        password = click.prompt(f"Password for {name}", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.UsageError("the password is empty")
    mechanisms = [m.upper() for m in mechanism] or ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    if zookeeper:
        _create_in_zookeeper(session, zookeeper, name, mechanisms, password, iterations)
        return
    if data_dir:
        _create_in_data_dir(session, data_dir, name, mechanisms, password, iterations)
        return
    with session.admin() as admin:
        admin.alter_user_scram_credentials(upsert=[(name, m, password, iterations) for m in mechanisms])
    session.info(f"User {name}: {', '.join(mechanisms)} credentials set.")


def _create_in_zookeeper(session, zookeeper: str, name: str, mechanisms: list[str], password: str, iterations: int) -> None:
    import asyncio

    from odradek.cluster.zk_client import ZooKeeperError
    from odradek.cluster.zk_security_store import write_scram_credentials
    from odradek.protocol.sasl_mechanisms import ScramCredential

    credentials = {m: ScramCredential.from_password(m, password, iterations).to_text() for m in mechanisms}
    try:
        asyncio.run(write_scram_credentials(zookeeper, name, credentials))
    except (ZooKeeperError, ValueError) as exc:
        raise click.ClickException(f"cannot write /config/users/{name} to ZooKeeper at {zookeeper}: {exc}") from None
    session.info(f"User {name}: {', '.join(mechanisms)} credentials set in ZooKeeper ({zookeeper}).")


def _create_in_data_dir(session, data_dir: str, name: str, mechanisms: list[str], password: str, iterations: int) -> None:
    from pathlib import Path

    from odradek.cluster.metadata_image import BrokerInfo
    from odradek.cluster.store import LocalMetadataStore
    from odradek.protocol.sasl_mechanisms import ScramCredential
    from odradek.storage.dir_lock import DirLock, LogDirInUseError

    path = Path(data_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
        lock = DirLock(str(path))
    except LogDirInUseError as exc:
        raise CliError(
            f"{data_dir} is in use ({exc})",
            "stop the broker first, or create the user through it: "
            f"odradek users create {name} --command-config admin.properties",
        ) from None
    except OSError as exc:
        raise CliError(f"cannot use {data_dir}: {exc.strerror or exc}", "give the broker's first log dir") from None
    try:
        store = LocalMetadataStore(path, "", BrokerInfo(0, "", 0))
        for m in mechanisms:
            store.set_scram_credential(name, m, ScramCredential.from_password(m, password, iterations).to_text())
    finally:
        lock.release()
    session.info(f"User {name}: {', '.join(mechanisms)} credentials set in {store.path}.")


@users.command()
@click.argument("name")
@click.option("--mechanism", "-m", type=MECHANISMS, multiple=True, help="Default: every mechanism the user has.")
@client_command
def delete(session, name, mechanism):
    """Remove a SCRAM user's credentials (the user can no longer authenticate with them).

    \b
    Examples:
      odradek users delete alice
      odradek users delete alice --mechanism SCRAM-SHA-256
    """
    with session.admin() as admin:
        mechanisms = [m.upper() for m in mechanism] or [
            c.mechanism for c in admin.describe_user_scram_credentials([name])[name]
        ]
        admin.alter_user_scram_credentials(delete=[(name, m) for m in mechanisms])
    session.info(f"User {name}: {', '.join(mechanisms)} credentials deleted.")


@users.command(name="list")
@click.argument("names", nargs=-1)
@client_command
def list_users(session, names):
    """List SCRAM users with their mechanisms and iteration counts (never secrets).

    \b
    Examples:
      odradek users list
      odradek users list alice bob -o json
    """
    with session.admin() as admin:
        found = admin.describe_user_scram_credentials(list(names) or None)
    rows = [[user, c.mechanism, c.iterations] for user, creds in sorted(found.items()) for c in creds]
    if session.json:
        session.print_json([{"user": u, "mechanism": m, "iterations": i} for u, m, i in rows])
        return
    session.table(["USER", "MECHANISM", "ITERATIONS"], rows)
