"""``odradek schema-registry``: Confluent's schema registry API as its own process."""

from __future__ import annotations

import logging
import sys

import click


@click.command("schema-registry")
@click.argument("properties", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a registry key, overriding the file (repeatable).",
)
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING or ERROR.")
def schema_registry(properties, overrides, log_level):
    """Run a schema registry that Confluent's clients use unchanged.

    PROPERTIES is a Confluent schema-registry.properties file. The registry keeps its
    state in the compacted topic kafkastore.topic (default _schemas) of the brokers at
    kafkastore.bootstrap.servers, and serves the REST API v1 on listeners (default
    http://0.0.0.0:8081). A broker started with `odradek server` already serves one on
    schema.registry.listeners (default http://127.0.0.1:8081); run this one for larger
    setups or apart from the brokers. Secured brokers: kafkastore.security.protocol,
    kafkastore.sasl.*, kafkastore.ssl.*. HTTPS: listeners=https://host:port with
    ssl.keystore.location (PEM). Users: authentication.method=BASIC checks HTTP basic
    credentials with the brokers (a SASL exchange as that user); authorizer.class.name
    lets the brokers' ACLs decide writes (Write on the topic named like the subject).

    \b
    Examples:
      odradek schema-registry config/schema-registry.properties
      odradek schema-registry --override kafkastore.bootstrap.servers=127.0.0.1:9092 \\
                              --override listeners=http://127.0.0.1:8082
      odradek schema-registry --override kafkastore.bootstrap.servers=127.0.0.1:9093 \\
          --override kafkastore.security.protocol=SASL_PLAINTEXT \\
          --override kafkastore.sasl.mechanism=PLAIN \\
          --override 'kafkastore.sasl.jaas.config=...PlainLoginModule required username="sr" password="s";' \\
          --override authentication.method=BASIC \\
          --override listeners=https://0.0.0.0:8081 --override ssl.keystore.type=PEM \\
          --override ssl.keystore.location=registry.pem
    """
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from odradek.properties import PropertiesError, load_properties
    from odradek.schema_registry.registry_config import RegistryConfigError, from_properties
    from odradek.schema_registry.registry_server import run

    props: dict[str, str] = {}
    try:
        if properties:
            props.update(load_properties(properties))
    except PropertiesError as exc:
        raise click.ClickException(str(exc)) from None
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--override")
        props[key.strip()] = value.strip()
    try:
        config = from_properties(props)
    except RegistryConfigError as exc:
        raise click.ClickException(f"invalid registry configuration: {exc}") from None
    try:
        run(config)
    except OSError as exc:
        raise click.ClickException(f"the registry cannot start: {exc}") from None
