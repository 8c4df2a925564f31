"""``odradek console``: the web console, JSON API and lag metrics for a cluster running elsewhere."""

from __future__ import annotations

import click

from odradek.cli.common import (
    CliError,
    Session,
    bootstrap_server_option,
    command_config_option,
    handle_errors,
)


@click.command()
@bootstrap_server_option
@command_config_option
@click.option(
    "--listen",
    default="http://127.0.0.1:9644",
    show_default=True,
    metavar="http://HOST:PORT",
    help="Where to serve the console; port 0 picks a free one.",
)
@click.option(
    "--schema-registry-url",
    metavar="URL",
    help="The schema registry the Schemas page reads (Odradek's or Confluent's), e.g. http://127.0.0.1:8081.",
)
@click.option(
    "--connect-url",
    "connect_urls",
    multiple=True,
    metavar="URL",
    help="A Kafka Connect REST URL the Connectors page reads (repeat it, or separate with commas), "
    "e.g. http://127.0.0.1:8083; http://user:password@host:8083 for basic authentication.",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the console in a web browser.")
def console(bootstrap_server, command_config, listen, schema_registry_url, connect_urls, open_browser):
    """Serve the web console for a cluster that runs elsewhere (Kafka or Odradek).

    A broker serves its own console on its HTTP listener (http.listeners, by default
    http://127.0.0.1:9644). This command serves the same pages and JSON API for any
    cluster, reading it through the Kafka protocol: overview, topics and their messages,
    consumer groups with their lag, brokers, the Kafka Connect connectors of
    --connect-url, and the actions (create topic, delete
    records, reset a group's offsets). /metrics carries the lag and offset families
    kafka-exporter names (kafka_consumergroup_lag, ...). Ctrl-C stops it.

    There is no login: keep --listen on loopback, or put a proxy that authenticates in
    front of it. More in docs/console.md.

    \b
    Examples:
      odradek console
      odradek console -b kafka1:9092,kafka2:9092 --listen http://0.0.0.0:8080
      odradek console -b kafka:9093 --command-config client.properties --open
      odradek console --connect-url http://127.0.0.1:8083
    """
    from odradek.broker.listeners import parse_http_listener

    address = parse_http_listener(listen)
    if address is None:
        raise click.BadParameter(f"expected http://HOST:PORT, got {listen!r}", param_hint="--listen")
    holder: list[Session] = []
    with handle_errors(lambda: holder[0] if holder else None):
        session = Session(bootstrap_server, command_config, "table")
        holder.append(session)
        session.probe()
        from odradek.http.http_server import HttpBindError
        from odradek.http.remote_console import run_console
        from odradek.http.remote_view import RemoteView

        view = RemoteView(
            session.bootstrap,
            {k: v for k, v in session.client_config("admin").items() if k != "bootstrap_servers"},
            {k: v for k, v in session.client_config("consumer").items() if k != "bootstrap_servers"},
        )

        def ready(urls: list[str]) -> None:
            click.echo(
                f"Odradek console for {session.bootstrap} on {', '.join(urls)} (Ctrl-C stops it)", err=True
            )
            if open_browser:
                import webbrowser

                webbrowser.open(urls[0])

        try:
            from odradek.http.connect_proxy import ConnectLink
            from odradek.http.schemas_proxy import SchemaRegistryLink

            schemas = SchemaRegistryLink(lambda: schema_registry_url) if schema_registry_url else None
            urls = [u.strip() for given in connect_urls for u in given.split(",") if u.strip()]
            run_console(view, [address], ready, schemas, connect=ConnectLink(lambda: urls))
        except HttpBindError as exc:
            raise CliError(str(exc.strerror or exc), "choose another --listen address") from None
