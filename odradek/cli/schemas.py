"""``odradek schemas``: a schema registry's subjects, versions, configs and modes over its REST API."""

from __future__ import annotations

import base64
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

import click

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
DEFAULT_URL = "http://127.0.0.1:8081"

url_option = click.option(
    "--url",
    default=lambda: os.environ.get("ODRADEK_SCHEMA_REGISTRY_URL", DEFAULT_URL),
    show_default=f"$ODRADEK_SCHEMA_REGISTRY_URL or {DEFAULT_URL}",
    help="The registry's base URL; https://user:password@host:port for a registry that asks "
    "basic credentials (or $ODRADEK_SCHEMA_REGISTRY_USER_INFO=user:password; a private CA in $SSL_CERT_FILE).",
)


class RegistryCallError(click.ClickException):
    """An error answer: printed as `error CODE: message`, exit status 1."""


def credentials(url: str) -> tuple[str, dict[str, str]]:
    """The URL without its user info, and the Authorization header of the user info in it
    (``https://user:password@host:8081``) or in $ODRADEK_SCHEMA_REGISTRY_USER_INFO
    (``user:password``, as Confluent's basic.auth.user.info)."""
    parts = urllib.parse.urlsplit(url)
    user_info = os.environ.get("ODRADEK_SCHEMA_REGISTRY_USER_INFO", "")
    if parts.username is not None:
        user_info = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
    if not user_info:
        return urllib.parse.urlunsplit(parts), {}
    return urllib.parse.urlunsplit(parts), {"Authorization": "Basic " + base64.b64encode(user_info.encode()).decode()}


def call(url: str, method: str, path: str, body=None, **query):
    """One request; the decoded JSON answer, or RegistryCallError with Confluent's code."""
    params = {k: str(v).lower() if isinstance(v, bool) else v for k, v in query.items() if v not in (None, False)}
    url, auth = credentials(url)
    full = url.rstrip("/") + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(full, data=data, method=method, headers={"Content-Type": CONTENT_TYPE, **auth})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            answer = json.loads(exc.read())
            hint = " (give them as --url https://user:password@host:port)" if exc.code == 401 else ""
            raise RegistryCallError(f"error {answer['error_code']}: {answer['message']}{hint}") from None
        except (ValueError, KeyError, TypeError):
            raise RegistryCallError(f"HTTP {exc.code} from {full}") from None
    except urllib.error.URLError as exc:
        raise RegistryCallError(
            f"cannot reach the registry at {url} ({exc.reason}); is it running? (--url, $ODRADEK_SCHEMA_REGISTRY_URL)"
        ) from None


def quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def emit(value) -> None:
    click.echo(json.dumps(value, indent=2) if not isinstance(value, str) else value)


def read_schema(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path) as f:
            return f.read()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}", param_hint="SCHEMA_FILE") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def schemas():
    """Subjects, versions, compatibility and modes of a schema registry.

    Works with Odradek's registry (`odradek server` serves one on http://127.0.0.1:8081)
    and with Confluent's. Errors print Confluent's code and message and exit with 1.

    \b
    Examples:
      odradek schemas register users-value user.avsc
      odradek schemas list
      odradek schemas get users-value --version latest
      odradek schemas get --id 1
      odradek schemas check users-value user-v2.avsc
      odradek schemas config users-value --set FULL_TRANSITIVE
      odradek schemas mode --set READONLY
      odradek schemas delete users-value && odradek schemas delete users-value --permanent
    """


@schemas.command("list")
@url_option
@click.option("--deleted", is_flag=True, help="Include soft-deleted subjects.")
@click.option("--prefix", default="", help="Only subjects starting with this.")
def list_subjects(url, deleted, prefix):
    """The subjects, one a line.

    \b
    Examples:
      odradek schemas list
      odradek schemas list --prefix orders- --deleted
    """
    for subject in call(url, "GET", "/subjects", deleted=deleted, subjectPrefix=prefix or None):
        click.echo(subject)


@schemas.command()
@url_option
@click.argument("subject", required=False)
@click.option("--version", default="latest", show_default=True, help="A version number or latest.")
@click.option("--id", "schema_id", type=int, help="Get the schema with this id instead of a subject's.")
@click.option("--versions", "list_versions", is_flag=True, help="List the subject's versions instead.")
def get(url, subject, version, schema_id, list_versions):
    """A subject's version (subject, version, id, schema) as JSON, or a schema by --id.

    \b
    Examples:
      odradek schemas get users-value
      odradek schemas get users-value --version 2
      odradek schemas get users-value --versions
      odradek schemas get --id 7
    """
    if schema_id is not None:
        emit(call(url, "GET", f"/schemas/ids/{schema_id}"))
    elif not subject:
        raise click.UsageError("give a SUBJECT or --id")
    elif list_versions:
        emit(call(url, "GET", f"/subjects/{quote(subject)}/versions"))
    else:
        emit(call(url, "GET", f"/subjects/{quote(subject)}/versions/{quote(version)}"))


def _body(schema_file: str, schema_type: str, references: tuple[str, ...]) -> dict:
    body: dict = {"schema": read_schema(schema_file)}
    if schema_type.upper() != "AVRO":
        body["schemaType"] = schema_type.upper()
    refs = []
    for item in references:
        name, _, rest = item.partition("=")
        subject, _, version = rest.rpartition(":")
        if not name or not subject or not version.isdigit():
            raise click.BadParameter(f"expected NAME=SUBJECT:VERSION, got {item!r}", param_hint="--reference")
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


schema_options = [
    click.argument("subject"),
    click.argument("schema_file", metavar="SCHEMA_FILE"),
    click.option("--type", "schema_type", default="AVRO", show_default=True, help="The schema type."),
    click.option("--reference", "references", multiple=True, metavar="NAME=SUBJECT:VERSION",
                 help="A type the schema uses from another subject (repeatable)."),  # fmt: skip
]


def with_schema_options(fn):
    for option in reversed(schema_options):
        fn = option(fn)
    return fn


@schemas.command()
@url_option
@with_schema_options
@click.option("--normalize", is_flag=True, help="Register the normalized form (same schema, same version).")
def register(url, subject, schema_file, schema_type, references, normalize):
    """Register SCHEMA_FILE (- for stdin) under SUBJECT; prints its id.

    \b
    Examples:
      odradek schemas register users-value user.avsc
      odradek schemas register orders-value order.avsc --reference com.example.User=users-value:1
    """
    answer = call(url, "POST", f"/subjects/{quote(subject)}/versions", _body(schema_file, schema_type, references),
                  normalize=normalize)  # fmt: skip
    click.echo(answer["id"])


@schemas.command()
@url_option
@with_schema_options
@click.option("--version", default="latest", show_default=True, help="Check against this version (latest: what the level says).")
def check(url, subject, schema_file, schema_type, references, version):
    """Whether SCHEMA_FILE may follow SUBJECT's versions; exit status 1 with the reasons if not.

    \b
    Examples:
      odradek schemas check users-value user-v2.avsc
      odradek schemas check users-value user-v2.avsc --version 1
    """
    answer = call(url, "POST", f"/compatibility/subjects/{quote(subject)}/versions/{quote(version)}",
                  _body(schema_file, schema_type, references), verbose=True)  # fmt: skip
    if answer["is_compatible"]:
        click.echo("compatible")
        return
    click.echo("incompatible:")
    for message in answer.get("messages") or ():
        click.echo(f"  {message}")
    sys.exit(1)


@schemas.command()
@url_option
@click.argument("subject")
@click.option("--version", help="Delete this version only (a number or latest).")
@click.option("--permanent", is_flag=True, help="Remove for good (after a soft delete).")
def delete(url, subject, version, permanent):
    """Soft-delete a subject (or one --version); --permanent afterwards removes it for good.

    \b
    Examples:
      odradek schemas delete users-value --version 3
      odradek schemas delete users-value && odradek schemas delete users-value --permanent
    """
    path = f"/subjects/{quote(subject)}" + (f"/versions/{quote(version)}" if version else "")
    emit(call(url, "DELETE", path, permanent=permanent))


def _setting(url, kind: str, field: str, body_field: str, subject, value, reset, **query):
    path = f"/{kind}" + (f"/{quote(subject)}" if subject else "")
    if value and reset:
        raise click.UsageError("--set and --delete exclude each other")
    if value:
        emit(call(url, "PUT", path, {body_field: value.upper()}, **query)[body_field])
    elif reset:
        emit(call(url, "DELETE", path)[field])
    else:
        emit(call(url, "GET", path, defaultToGlobal=bool(subject))[field])


@schemas.command()
@url_option
@click.argument("subject", required=False)
@click.option("--set", "value", metavar="LEVEL",
              help="NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL or FULL_TRANSITIVE.")  # fmt: skip
@click.option("--delete", "reset", is_flag=True, help="Remove the subject's level (the global one applies).")
def config(url, subject, value, reset):
    """Show or set the compatibility level, global or of SUBJECT.

    \b
    Examples:
      odradek schemas config
      odradek schemas config users-value --set FULL_TRANSITIVE
      odradek schemas config users-value --delete
    """
    _setting(url, "config", "compatibilityLevel", "compatibility", subject, value, reset)


@schemas.command()
@url_option
@click.argument("subject", required=False)
@click.option("--set", "value", metavar="MODE", help="READWRITE, READONLY or IMPORT.")
@click.option("--delete", "reset", is_flag=True, help="Remove the subject's mode (the global one applies).")
@click.option("--force", is_flag=True, help="Switch to IMPORT although subjects exist.")
def mode(url, subject, value, reset, force):
    """Show or set the mode, global or of SUBJECT.

    \b
    Examples:
      odradek schemas mode
      odradek schemas mode users-value --set READONLY
      odradek schemas mode --set IMPORT --force
    """
    _setting(url, "mode", "mode", "mode", subject, value, reset, force=force)
